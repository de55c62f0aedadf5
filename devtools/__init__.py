"""Development tools shared by the tests, the benchmarks and the e2e suite; never shipped.

* `documents`: the parts of an override document the checks read, picked
  out with their own few lines, not the product's code;
* `waiting`: polling a condition with a deadline;
* `podresources`: a fake of the kubelet's pod-resources API, in its own process;
* `upstream`: upstream's nvml-mock-ctl and mock NVML library, found or built;
* `kubeapiserver`: etcd and a kube-apiserver from the local cluster's build, as processes.
"""
