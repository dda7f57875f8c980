package localtools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// Runner runs one command confined to the workspace, exactly as bash is confined (the
// sandbox package provides it). Declarative tools are never registered without one.
type Runner interface {
	Run(ctx context.Context, req RunRequest) (*RunResult, error)
}

// RunRequest is one confined command.
type RunRequest struct {
	Argv          []string
	AllowInternet bool
	Timeout       time.Duration
}

// RunResult is what a confined command produced. Output is already capped; Truncated
// says so.
type RunResult struct {
	Stdout, Stderr string
	ExitCode       int
	Truncated      bool
	TimedOut       bool
}

// DeclarativeDir is where declarative tool definitions live, relative to the workspace.
const DeclarativeDir = ".agents/tools/main"

// Limits on declarative definitions.
const (
	maxDeclFiles     = 200
	maxDeclFileBytes = 64 << 10
	maxDeclDepth     = 8
	maxArgBytes      = 64 << 10
	defaultDeclTime  = 60 * time.Second
	maxDeclTime      = 600 * time.Second
)

// declFile is the on-disk format of one declarative tool (docs/toolgate-mcp.md).
type declFile struct {
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Command     []string        `json:"command"`
	// AllowLeadingDash names placeholders whose values may start with "-" even where
	// the program could read them as options.
	AllowLeadingDash []string `json:"allowLeadingDash"`
	TimeoutSeconds   int      `json:"timeoutSeconds"`
	ReadOnly         bool     `json:"readOnly"`
}

var (
	declNameRE    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
	placeholderRE = regexp.MustCompile(`^\{\{([A-Za-z_][A-Za-z0-9_]{0,63})\}\}$`)
)

// Declarative loads every valid tool definition under <workspace>/.agents/tools/main.
// Invalid files are skipped with a warning naming the file and the reason; one bad file
// never hides the others. Links are not followed. reserved names (built-in tools) and
// names starting with "toolgate_" are refused, so published names stay one-to-one even
// unprefixed.
func Declarative(ws *workspace.Workspace, run Runner, reserved map[string]bool, allowInternet bool, warn io.Writer) []*kernel.Tool {
	if run == nil {
		return nil
	}
	fi, err := ws.Root().Lstat(DeclarativeDir)
	if err != nil || !fi.IsDir() {
		return nil
	}
	if linked, err := ws.HasLink(DeclarativeDir); err != nil || linked {
		// .agents or .agents/tools is a link: the definitions would be read from where
		// it points, a place the protected-path rules do not cover.
		fmt.Fprintf(warn, "toolgate: declarative tools: %s goes through a symbolic link; no declarative tools are loaded\n", DeclarativeDir)
		return nil
	}
	var tools []*kernel.Tool
	names := map[string]string{}
	count := 0
	fs.WalkDir(ws.Root().FS(), DeclarativeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(warn, "toolgate: declarative tools: skipping %s: %v\n", p, stripRoot(err))
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if strings.Count(strings.TrimPrefix(p, DeclarativeDir), "/") > maxDeclDepth {
				fmt.Fprintf(warn, "toolgate: declarative tools: skipping %s: deeper than %d levels\n", p, maxDeclDepth)
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".json") {
			return nil
		}
		if !d.Type().IsRegular() {
			fmt.Fprintf(warn, "toolgate: declarative tools: skipping %s: not a regular file\n", p)
			return nil
		}
		count++
		if count > maxDeclFiles {
			fmt.Fprintf(warn, "toolgate: declarative tools: more than %d files; the rest are skipped\n", maxDeclFiles)
			return fs.SkipAll
		}
		t, err := loadDecl(ws, p, run, allowInternet)
		if err == nil {
			n := localName(t.ID)
			switch {
			case reserved[n]:
				err = fmt.Errorf("name %q is a built-in tool", n)
			case names[n] != "":
				err = fmt.Errorf("name %q is already defined by %s", n, names[n])
			}
		}
		if err != nil {
			fmt.Fprintf(warn, "toolgate: declarative tools: skipping %s: %v\n", p, err)
			return nil
		}
		names[localName(t.ID)] = p
		tools = append(tools, t)
		return nil
	})
	return tools
}

// declSpec is a parsed, checked definition.
type declSpec struct {
	argv     []string // literal or placeholder elements
	holder   []string // placeholder name per element, "" for literal
	dashOK   map[string]bool
	timeout  time.Duration
	required map[string]bool
}

func loadDecl(ws *workspace.Workspace, p string, run Runner, allowInternet bool) (*kernel.Tool, error) {
	f, _, err := openRegular(ws, p)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDeclFileBytes+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	df, spec, schema, err := parseDecl(data)
	if err != nil {
		return nil, err
	}
	ann := kernel.Annotations{ReadOnly: df.ReadOnly, Destructive: !df.ReadOnly, OpenWorld: boolp(allowInternet)}
	desc := df.Description
	return &kernel.Tool{
		ID:          "local." + df.Name,
		Title:       df.Title,
		Description: desc,
		InputSchema: schema,
		Annotations: ann,
		Source:      "workspace",
		// A declarative tool runs a program in the workspace, like bash: it is
		// authorized as execution over the whole workspace.
		Access: func(args map[string]any) (kernel.Access, error) {
			if _, err := spec.expand(args); err != nil {
				return kernel.Access{}, err
			}
			return kernel.Access{Action: kernel.ActionExecute, Resource: "path:."}, nil
		},
		Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
			argv, err := spec.expand(call.Args)
			if err != nil {
				return nil, err
			}
			res, err := run.Run(ctx, RunRequest{Argv: argv, AllowInternet: allowInternet, Timeout: spec.timeout})
			if err != nil {
				return nil, err
			}
			return runOutput(res, spec.timeout), nil
		},
	}, nil
}

// parseDecl decodes and checks one definition file's bytes (at most maxDeclFileBytes):
// strict JSON, no unknown fields, nothing after the object.
func parseDecl(data []byte) (*declFile, *declSpec, json.RawMessage, error) {
	if len(data) > maxDeclFileBytes {
		return nil, nil, nil, fmt.Errorf("larger than %d bytes", maxDeclFileBytes)
	}
	var df declFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&df); err != nil {
		return nil, nil, nil, fmt.Errorf("not a valid definition: %v", err)
	}
	if dec.More() {
		return nil, nil, nil, fmt.Errorf("trailing data after the definition")
	}
	spec, schema, err := checkDecl(&df)
	if err != nil {
		return nil, nil, nil, err
	}
	return &df, spec, schema, nil
}

func checkDecl(df *declFile) (*declSpec, json.RawMessage, error) {
	if !declNameRE.MatchString(df.Name) {
		return nil, nil, fmt.Errorf("name %q must match %s", df.Name, declNameRE)
	}
	if strings.HasPrefix(df.Name, "toolgate_") {
		return nil, nil, fmt.Errorf("name %q: the toolgate_ prefix is reserved", df.Name)
	}
	if strings.TrimSpace(df.Description) == "" || len(df.Description) > 4096 {
		return nil, nil, fmt.Errorf("description is required (at most 4096 bytes)")
	}
	if len(df.Command) == 0 || len(df.Command) > 256 {
		return nil, nil, fmt.Errorf("command must be a list of 1…256 strings")
	}
	if df.TimeoutSeconds < 0 || time.Duration(df.TimeoutSeconds)*time.Second > maxDeclTime {
		return nil, nil, fmt.Errorf("timeoutSeconds must be 1…%d", int(maxDeclTime/time.Second))
	}
	// The schema: an object schema whose properties the placeholders name.
	var sch map[string]any
	if err := json.Unmarshal(df.InputSchema, &sch); err != nil || sch == nil {
		return nil, nil, fmt.Errorf("inputSchema must be a JSON object")
	}
	if sch["type"] != "object" {
		return nil, nil, fmt.Errorf(`inputSchema must have "type": "object"`)
	}
	if sch["additionalProperties"] != false {
		return nil, nil, fmt.Errorf(`inputSchema must have "additionalProperties": false`)
	}
	props, _ := sch["properties"].(map[string]any)
	required := map[string]bool{}
	if rq, ok := sch["required"].([]any); ok {
		for _, r := range rq {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	if err := compileSchema(df.InputSchema); err != nil {
		return nil, nil, fmt.Errorf("inputSchema: %v", err)
	}
	spec := &declSpec{dashOK: map[string]bool{}, required: required, timeout: defaultDeclTime}
	if df.TimeoutSeconds > 0 {
		spec.timeout = time.Duration(df.TimeoutSeconds) * time.Second
	}
	for i, el := range df.Command {
		if strings.IndexByte(el, 0) >= 0 {
			return nil, nil, fmt.Errorf("command[%d] contains a NUL byte", i)
		}
		m := placeholderRE.FindStringSubmatch(el)
		if m == nil {
			if strings.Contains(el, "{{") {
				return nil, nil, fmt.Errorf("command[%d] %q: a placeholder must be a whole element, like \"{{name}}\"", i, el)
			}
			if i == 0 && el == "" {
				return nil, nil, fmt.Errorf("command[0] (the program) is empty")
			}
			spec.argv = append(spec.argv, el)
			spec.holder = append(spec.holder, "")
			continue
		}
		if i == 0 {
			return nil, nil, fmt.Errorf("command[0] (the program) must be literal, not a placeholder")
		}
		name := m[1]
		prop, ok := props[name].(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("command[%d] names {{%s}}, which is not in inputSchema.properties", i, name)
		}
		if !required[name] {
			return nil, nil, fmt.Errorf("placeholder {{%s}} must be listed in inputSchema.required", name)
		}
		switch prop["type"] {
		case "string", "integer", "number", "boolean":
		default:
			return nil, nil, fmt.Errorf("placeholder {{%s}} must have a scalar type (string, integer, number or boolean)", name)
		}
		spec.argv = append(spec.argv, "")
		spec.holder = append(spec.holder, name)
	}
	for _, n := range df.AllowLeadingDash {
		if _, ok := props[n]; !ok {
			return nil, nil, fmt.Errorf("allowLeadingDash names %q, which is not in inputSchema.properties", n)
		}
		spec.dashOK[n] = true
	}
	return spec, df.InputSchema, nil
}

func compileSchema(raw json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	const loc = "toolgate:///declarative.json"
	if err := c.AddResource(loc, doc); err != nil {
		return err
	}
	_, err = c.Compile(loc)
	return err
}

// refuseLoader refuses every external $ref: a workspace file must never make toolgate
// read another file or fetch a URL.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q refused", url)
}

// expand fills the template. Each placeholder becomes exactly one argv element. A value
// starting with "-" is refused where the program could take it as an option (before a
// literal "--" element) unless the definition allows it for that placeholder.
func (s *declSpec) expand(args map[string]any) ([]string, error) {
	out := make([]string, len(s.argv))
	afterDashDash := false
	for i, lit := range s.argv {
		name := s.holder[i]
		if name == "" {
			out[i] = lit
			if lit == "--" {
				afterDashDash = true
			}
			continue
		}
		v, ok := args[name]
		if !ok || v == nil {
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "%s is required", name)
		}
		var str string
		switch x := v.(type) {
		case string:
			str = x
		case bool:
			str = strconv.FormatBool(x)
		case float64:
			str = strconv.FormatFloat(x, 'f', -1, 64)
		case json.Number:
			str = x.String()
		default:
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "%s must be a string, number or boolean", name)
		}
		if strings.IndexByte(str, 0) >= 0 {
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "%s contains a NUL byte", name)
		}
		if len(str) > maxArgBytes {
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "%s is longer than %d bytes", name, maxArgBytes)
		}
		if strings.HasPrefix(str, "-") && !afterDashDash && !s.dashOK[name] {
			return nil, kernel.Failed(kernel.CodeInvalidArguments,
				"%s starts with \"-\" and would be read as an option; values starting with \"-\" are refused here", name)
		}
		out[i] = str
	}
	return out, nil
}

func runOutput(res *RunResult, timeout time.Duration) *kernel.Output {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d\n", res.ExitCode)
	if res.TimedOut {
		fmt.Fprintf(&b, "[timed out after %s; the process tree was killed]\n", timeout)
	}
	if res.Stdout != "" {
		b.WriteString("--- stdout ---\n")
		b.WriteString(strings.ToValidUTF8(res.Stdout, "\uFFFD"))
		if !strings.HasSuffix(res.Stdout, "\n") {
			b.WriteByte('\n')
		}
	}
	if res.Stderr != "" {
		b.WriteString("--- stderr ---\n")
		b.WriteString(strings.ToValidUTF8(res.Stderr, "\uFFFD"))
		if !strings.HasSuffix(res.Stderr, "\n") {
			b.WriteByte('\n')
		}
	}
	if res.Truncated {
		b.WriteString("[truncated: output exceeded the cap]\n")
	}
	return &kernel.Output{Text: b.String(), IsError: res.ExitCode != 0 || res.TimedOut}
}
