// An empty stand-in for nerdctl's test-only module, which the Go module
// proxy does not serve; nothing nerdctl builds imports it (see ../go.mod).
module github.com/containerd/nerdctl/mod/tigron

go 1.24
