// Command etcd is upstream etcd's server entry point, built from Go modules at
// the version pinned in go.mod. Debian's etcd (3.4) is too old for the API
// server's watch-progress requests, and no release binary can be downloaded.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
