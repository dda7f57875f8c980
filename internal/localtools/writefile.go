package localtools

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// MaxWriteBytes bounds one write_file's content.
const MaxWriteBytes = 4 << 20

var writeFileSchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"path", "content"},
	"properties": map[string]any{
		"path": map[string]any{"type": "string", "minLength": 1, "maxLength": 4096,
			"description": "File path relative to the workspace root. Missing parent directories are created."},
		"content": map[string]any{"type": "string", "maxLength": MaxWriteBytes,
			"description": "The complete new content of the file (UTF-8 text)."},
	},
})

func writeFileTool(ws *workspace.Workspace) *kernel.Tool {
	return &kernel.Tool{
		ID:    "local.write_file",
		Title: "Write a file",
		Description: "Create or replace a file in the workspace with the given content, atomically " +
			"(a reader sees the old or the new file, never a mix). Never writes through symbolic " +
			"links or to files with several hard links.",
		InputSchema: writeFileSchema,
		Annotations: kernel.Annotations{Destructive: true, Idempotent: true, OpenWorld: boolp(false)},
		Source:      "toolgate",
		Access: func(args map[string]any) (kernel.Access, error) {
			p, err := requireString(args, "path")
			if err != nil {
				return kernel.Access{}, err
			}
			a, _, err := writeAccess(ws, p)
			return a, err
		},
		Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
			return writeFile(ws, call.Args)
		},
	}
}

func writeFile(ws *workspace.Workspace, args map[string]any) (*kernel.Output, error) {
	p, err := requireString(args, "path")
	if err != nil {
		return nil, err
	}
	content, err := requireString(args, "content")
	if err != nil {
		return nil, err
	}
	if len(content) > MaxWriteBytes {
		return nil, kernel.Failed(kernel.CodeInvalidArguments, "content is %d bytes; at most %d per write", len(content), MaxWriteBytes)
	}
	// Re-derive (the file system may have changed since Access ran).
	_, rel, err := writeAccess(ws, p)
	if err != nil {
		return nil, err
	}
	mode, existed, err := checkWritable(ws, rel)
	if err != nil {
		return nil, err
	}
	pend, err := stage(ws, rel, []byte(content), mode)
	if err != nil {
		return nil, err
	}
	// Check again right before the rename, narrowing the window in which something else
	// could plant a link or a hard link at the target.
	if _, _, err := checkWritable(ws, rel); err != nil {
		pend.abort(ws)
		return nil, err
	}
	if err := pend.commit(ws); err != nil {
		pend.abort(ws)
		return nil, err
	}
	verb := "created"
	if existed {
		verb = "replaced"
	}
	return &kernel.Output{Text: fmt.Sprintf("%s %s (%s)", verb, rel, plural(len(content), "byte", "bytes"))}, nil
}
