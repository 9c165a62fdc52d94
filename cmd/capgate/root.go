package main

import "github.com/spf13/cobra"

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "capgate",
		Short:         "Capability-token fetch authorization for Apache Kafka",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newCoordinatorCmd(), newGatewayCmd(), newKeysCmd(), newTokenCmd(), newAdminCmd(),
		newDevCmd(), newConsumeCmd(), newProduceCmd(), newVersionCmd())
	return root
}
