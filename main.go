// Command federation-autoscaler is the single binary of Federation
// Autoscaler: the broker, the agents, the Cluster Autoscaler adapter, the
// mock services, the PKI tool and the one-command demo are its subcommands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/adaptercmd"
	"github.com/federation-autoscaler/federation-autoscaler/agent/agentcmd"
	"github.com/federation-autoscaler/federation-autoscaler/agent/choiceeval"
	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/democmd"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/experimentcmd"
	mockgeo "github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	liqosim "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/mockcmd"
	"github.com/federation-autoscaler/federation-autoscaler/server/brokercmd"
	"github.com/federation-autoscaler/federation-autoscaler/server/loadgencmd"
	"github.com/federation-autoscaler/federation-autoscaler/server/pkicmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := cli.NewRoot(
		brokercmd.NewCommand(),
		pkicmd.NewCommand(),
		// The agent links liqoctl; the binary adds the simulated Liqo as
		// --liqo-driver sim and gives the consoles' location picker
		// mock-geo's cities (only here and in the demo does the simulation
		// meet the agent).
		agentcmd.NewCommand(mockgeo.Places(), liqosim.DriverChoice()),
		adaptercmd.NewCommand(),
		mockcmd.NewGeoCommand(),
		mockcmd.NewEcoCommand(),
		democmd.NewCommand(),
		experimentcmd.NewCommand(),
		loadgencmd.NewCommand(),
		choiceeval.NewCommand(),
	)
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
