// Package pgtest starts a throwaway PostgreSQL server from the
// distribution's binaries (apt-get install postgresql), for the tests and
// the benchmark: initdb into a new temp dir, postgres listening on a unix
// socket in it and nowhere else (no port for parallel test runs to fight
// over), the dir removed on Stop. PostgreSQL refuses to run as root, so a
// root caller runs it as the `postgres` system user the package made.
//
// Nothing here is linked into clawpen.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned by Start when initdb or postgres is not found.
var ErrNoBinaries = errors.New("no PostgreSQL binaries (initdb, postgres) in $PATH or /usr/lib/postgresql/*/bin: apt-get install postgresql")

// Options shape a server.
type Options struct {
	// Durable keeps PostgreSQL's default fsync and synchronous commit, as a
	// production server runs: the benchmark measures what they cost. Tests
	// turn them off.
	Durable bool
}

// Server is a running throwaway PostgreSQL server.
type Server struct {
	dir  string // temp dir: data/, the socket, postgres.log
	cmd  *exec.Cmd
	done chan struct{} // closed once postgres exited
	dbs  atomic.Int64  // databases made by NewDatabase
}

// BinDir finds the directory holding initdb and postgres: $PATH, else the
// newest /usr/lib/postgresql/<version>/bin (Debian keeps them there).
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start makes a cluster in a new temp dir and starts postgres on it. It
// returns ErrNoBinaries (wrapped) when PostgreSQL is not installed.
func Start(ctx context.Context, o Options) (_ *Server, err error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "clawpen-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}
	data := filepath.Join(dir, "data")
	// --no-sync: a throwaway cluster need not survive a power cut.
	if out, err := run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	args := []string{"-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "max_connections=300"}
	if !o.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	logf, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	cmd := run("postgres", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A test binary that dies takes its server with it (immediate shutdown).
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	s := &Server{dir: dir, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The death signal follows the thread that started postgres, not
		// the process: this thread is kept for as long as postgres runs
		// (another goroutine's locked thread ending would signal it).
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// runAs is the user postgres runs as: nil (the caller's own) unless the
// caller is root, which PostgreSQL refuses; then the postgres system user.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: PostgreSQL refuses to run as root, and there is no postgres user to run it as (apt-get install postgresql makes one): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// waitReady waits until the server takes connections (the machine may be
// busy: no short bound).
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			return c.Close(ctx)
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", log)
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres not ready: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is the connection URL of database db, over the server's socket.
func (s *Server) URL(db string) string {
	return "postgres://postgres@/" + db + "?host=" + s.dir + "&sslmode=disable"
}

// NewDatabase makes an empty database of its own and returns its URL.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("clawpen_%d", s.dbs.Add(1))
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return s.URL(name), nil
}

// Stop shuts the server down (fast: open sessions are ended) and removes
// its directory.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		s.kill()
	}
	return os.RemoveAll(s.dir)
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// The server a test binary shares: started by the first test that asks,
// stopped by Main.
var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared is the test binary's server, started on first use. A machine
// without PostgreSQL skips the test, saying so; any other failure to start
// fails it.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = Start(context.Background(), Options{}) })
	if errors.Is(shared.err, ErrNoBinaries) {
		t.Skipf("PostgreSQL: %v", shared.err)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// NewDatabase is a database of its own on the shared server, for one test.
func NewDatabase(t testing.TB) string {
	t.Helper()
	u, err := Shared(t).NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Main runs the tests and then stops the shared server (StopShared).
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the shared server, if one started; after the tests.
func StopShared() {
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
}
