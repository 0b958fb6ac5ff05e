package hostsock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// serveIPC answers POST /ipc/<op> through cfg.IPC with the socket's identity.
func (s *Server) serveIPC(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.URL.Path, "/ipc/")
	if s.cfg.IPC == nil || !validOp(op) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown operation %q", op))
		return
	}
	body, res, ok := s.readBody(w, r, s.lim.MaxIPCBytes)
	if !ok {
		return
	}
	defer res.release()
	if len(body) > 0 && !json.Valid(body) {
		writeError(w, http.StatusBadRequest, "body is not valid JSON")
		return
	}
	// The identity is the one this socket was made for; nothing in the request
	// can change it.
	status, resp := s.cfg.IPC(r.Context(), s.caller, op, body)
	if status == 0 {
		status = http.StatusOK
	}
	if resp == nil {
		resp = struct{}{}
	}
	s.log.Debug("ipc", "op", op, "status", status)
	writeJSON(w, status, resp)
}

// validOp accepts operation names like send_message or list-tasks.
func validOp(op string) bool {
	if op == "" || len(op) > 64 {
		return false
	}
	for _, c := range op {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
