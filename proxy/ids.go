package proxy

import "github.com/replproxy/replproxy/replid"

// ReplIDSize is the length of a replication ID: 40 lowercase hex characters
// (Redis's CONFIG_RUN_ID_SIZE). The replid rules live in package replid.
const ReplIDSize = replid.Size
