package localtools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// maxLineScan bounds how far read_file reads to find its first line: with no per-call
// deadline, skipping to a far offset of a huge sparse file would otherwise read it all.
var maxLineScan int64 = 4 << 30

// Read limits. A single answer never carries more than MaxReadBytes of file content;
// anything cut says so with a marker naming how to continue.
const (
	MaxReadBytes     = 256 << 10
	DefaultReadLines = 2000
)

var readFileSchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"path"},
	"properties": map[string]any{
		"path": map[string]any{"type": "string", "minLength": 1, "maxLength": 4096,
			"description": "File path relative to the workspace root."},
		"offset": map[string]any{"type": "integer", "minimum": 1,
			"description": "First line to return (1-based). Default 1."},
		"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": 100000,
			"description": fmt.Sprintf("Maximum number of lines to return. Default %d.", DefaultReadLines)},
		"byte_offset": map[string]any{"type": "integer", "minimum": 0,
			"description": "Read a byte range instead of lines: first byte (0-based). Not combinable with offset/limit."},
		"byte_length": map[string]any{"type": "integer", "minimum": 1, "maximum": MaxReadBytes,
			"description": "Number of bytes to read from byte_offset (default and maximum 262144)."},
	},
})

func readFileTool(ws *workspace.Workspace) *kernel.Tool {
	return &kernel.Tool{
		ID:    "local.read_file",
		Title: "Read a file",
		Description: "Read a text file in the workspace, by lines (offset/limit) or by bytes " +
			"(byte_offset/byte_length). At most 256 KiB per call; when more exists the answer ends " +
			"with a [truncated …] line that says how to continue. Only regular files are read.",
		InputSchema: readFileSchema,
		Annotations: kernel.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: boolp(false)},
		Source:      "toolgate",
		Access: func(args map[string]any) (kernel.Access, error) {
			p, err := requireString(args, "path")
			if err != nil {
				return kernel.Access{}, err
			}
			return readAccess(ws, p)
		},
		Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
			return readFile(ctx, ws, call.Args)
		},
	}
}

func readFile(ctx context.Context, ws *workspace.Workspace, args map[string]any) (*kernel.Output, error) {
	p, err := requireString(args, "path")
	if err != nil {
		return nil, err
	}
	offset, hasOff, err := argInt(args, "offset")
	if err != nil {
		return nil, err
	}
	limit, hasLim, err := argInt(args, "limit")
	if err != nil {
		return nil, err
	}
	bOff, hasBOff, err := argInt(args, "byte_offset")
	if err != nil {
		return nil, err
	}
	bLen, hasBLen, err := argInt(args, "byte_length")
	if err != nil {
		return nil, err
	}
	byteMode := hasBOff || hasBLen
	if byteMode && (hasOff || hasLim) {
		return nil, kernel.Failed(kernel.CodeInvalidArguments, "give either offset/limit (lines) or byte_offset/byte_length (bytes), not both")
	}
	if (hasOff && offset < 1) || (hasLim && limit < 1) || bOff < 0 || (hasBLen && (bLen < 1 || bLen > MaxReadBytes)) {
		return nil, kernel.Failed(kernel.CodeInvalidArguments, "offset and limit must be ≥ 1, byte_offset ≥ 0, byte_length 1…%d", MaxReadBytes)
	}
	rel, err := ws.Rel(p)
	if err != nil {
		return nil, err
	}
	f, fi, err := openRegular(ws, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := fi.Size()
	if byteMode {
		if !hasBLen {
			bLen = MaxReadBytes
		}
		buf := make([]byte, bLen)
		n, err := f.ReadAt(buf, bOff)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, kernel.Failed(kernel.CodeToolFailed, "reading %s: %v", rel, stripRoot(err))
		}
		text := toText(buf[:n])
		end := bOff + int64(n)
		if end < size {
			text = withMarker(text, fmt.Sprintf("[truncated: showed bytes %d–%d of %d; call read_file with byte_offset=%d to continue]", bOff, end, size, end))
		}
		return &kernel.Output{Text: text}, nil
	}
	if !hasOff {
		offset = 1
	}
	if !hasLim {
		limit = DefaultReadLines
	}
	r := readers.Get().(*bufio.Reader)
	r.Reset(io.LimitReader(f, 1<<40))
	defer func() { r.Reset(nil); readers.Put(r) }()
	// The shown lines are appended straight into out, at most MaxReadBytes+1 bytes.
	out := make([]byte, 0, min(size, MaxReadBytes)+1)
	line := int64(0)
	shown := int64(0)
	var pos int64 // bytes consumed
	cut := ""
	for {
		// Keep no more of a line than could be shown: a line is not a unit of memory
		// (a newline-free 1 GiB file cost 2 GiB when lines were read whole).
		max := -1
		if line+1 >= offset {
			max = MaxReadBytes - len(out)
			if shown >= limit {
				max = 0
			}
		}
		start := len(out)
		var n int64
		var err error
		out, n, err = readLine(ctx, r, max, out)
		if n > 0 {
			line++
			if line%4096 == 0 && ctx.Err() != nil {
				// Skipping to a far offset in a huge file stops when the call is cancelled.
				return nil, kernel.Failed(kernel.CodeTimeout, "reading %s was cancelled", rel)
			}
			if line >= offset {
				if shown >= limit {
					out = out[:start]
					cut = fmt.Sprintf("[truncated: showed lines %d–%d; the file has more (%d bytes); call read_file with offset=%d to continue]",
						offset, offset+shown-1, size, line)
					break
				}
				if int64(start)+n > MaxReadBytes {
					room := MaxReadBytes - start
					if shown == 0 && room > 0 {
						// One line longer than the cap: show its start, continue by bytes.
						out = out[:start+room]
						cut = fmt.Sprintf("[truncated: line %d is longer than %d bytes; call read_file with byte_offset=%d to continue]",
							line, MaxReadBytes, pos+int64(room))
					} else {
						out = out[:start]
						cut = fmt.Sprintf("[truncated: showed lines %d–%d (%d-byte cap); call read_file with offset=%d to continue]",
							offset, offset+shown-1, MaxReadBytes, line)
					}
					break
				}
				shown++
			} else {
				out = out[:start]
			}
			pos += n
			if line < offset && pos > maxLineScan {
				// Skipping this far by lines would read the whole file first (a sparse
				// file can be terabytes); bytes can be reached directly.
				return &kernel.Output{Text: fmt.Sprintf("[not read: line %d lies more than %d bytes into %s (%d bytes); read that part with byte_offset instead]",
					offset, maxLineScan, rel, size)}, nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, kernel.Failed(kernel.CodeTimeout, "reading %s was cancelled", rel)
			}
			if !errors.Is(err, io.EOF) {
				return nil, kernel.Failed(kernel.CodeToolFailed, "reading %s: %v", rel, stripRoot(err))
			}
			break
		}
	}
	text := toText(out)
	if shown == 0 && cut == "" && offset > 1 && line < offset {
		text = fmt.Sprintf("[no lines: the file has %d lines; offset %d is past its end]", line, offset)
	}
	return &kernel.Output{Text: withMarker(text, cut)}, nil
}

// readLine consumes one line of r (through its '\n', or to the end), appends the first
// max+1 bytes of it to dst, and returns dst and the number of bytes it consumed. With
// max ≥ 0 it stops consuming as soon as more than max bytes were read (the caller
// shows at most max), so a line of any length costs at most max+1 bytes of memory;
// with max < 0 it consumes the whole line, keeping nothing, checking ctx every 64 MiB.
func readLine(ctx context.Context, r *bufio.Reader, max int, dst []byte) ([]byte, int64, error) {
	kept := 0
	var n int64
	for i := 1; ; i++ {
		frag, err := r.ReadSlice('\n')
		n += int64(len(frag))
		if room := max + 1 - kept; max >= 0 && room > 0 {
			take := min(room, len(frag))
			dst = append(dst, frag[:take]...)
			kept += take
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return dst, n, err
		}
		if max >= 0 && n > int64(max) {
			return dst, n, nil
		}
		if i%1024 == 0 && ctx.Err() != nil {
			return dst, n, ctx.Err()
		}
	}
}

// readers are the 64 KiB line readers of read_file, reused across calls.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// withMarker appends a truncation marker on its own line.
func withMarker(text, marker string) string {
	if marker == "" {
		return text
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + marker
}

// toText makes file bytes safe to carry as a JSON string: invalid UTF-8 (a binary file,
// or a range cut inside a character) becomes U+FFFD, and the reader is told.
func toText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD") + "\n[note: the content is not valid UTF-8; invalid bytes are shown as U+FFFD]"
}
