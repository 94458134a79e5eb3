// Command kubectl is upstream kubectl (k8s.io/kubectl, the same main as
// k8s.io/kubernetes/cmd/kubectl) pinned to the test control plane's version.
// The deploy tests (deploy/deploytest) run the standalone scripts with it on
// PATH; build-kubectl.sh builds it into a cache folder outside the
// repository. It lives in its own module so kubectl's dependency graph never
// enters the product's go.mod.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
