package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/theloop-dev/theloop/loop/api"
)

// UsageInput is the usage tool's input (GET /usage's query).
type UsageInput struct {
	WorkItem   string `json:"workItem,omitempty" jsonschema:"one work item's ref, github:owner/repo#42 (none: every item)"`
	By         string `json:"by,omitempty" jsonschema:"group by node (default), session, day, model, item or repository"`
	Repository string `json:"repository,omitempty" jsonschema:"only this repository, owner/repo"`
}

func addUsageTool(s *mcp.Server, o operatorTools) {
	mcp.AddTool(s, &mcp.Tool{Name: "usage", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "What the agent sessions spent: tokens by kind (input, output, cache write, cache read), turns, models and an estimated cost from the configured rate card (cost null: a model without a rate), grouped by node, session, day, model, item or repository; with the item's budget state. Tokens are the harness's own record; cost is an estimate."},
		o.usage)
}

func (o operatorTools) usage(ctx context.Context, _ *mcp.CallToolRequest, in UsageInput) (*mcp.CallToolResult, api.UsageReport, error) {
	rep, err := o.op.Usage(ctx, api.UsageQuery{Item: in.WorkItem, By: in.By, Repository: in.Repository})
	return nil, rep, err
}
