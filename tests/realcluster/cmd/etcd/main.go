// Command etcd is etcd's own server entry point (go.etcd.io/etcd/server/v3/etcdmain), built from
// the server module at the release k8s.io/kubernetes v1.37.2 requires. etcd's main package lives in
// its root module, which a dependent module cannot build, so this file only calls etcdmain.Main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
