package errtext

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"unicode/utf8"
)

// realFailures are failures' texts as programs wrote them, copied from
// public issue threads and pages (each one's source beside it), with
// their causes. Two texts of one failure on other hosts, ports or
// instances are kept in pairs (a and b).
var realFailures = []struct {
	name, source, text, cause string
}{
	// Go's net package and runtime, as Go programs print them.
	{"go ipv6 refused", "https://github.com/utronframework/todo/issues/1",
		"dial tcp [::1]:5432: connectex: No connection could be made because the target machine actively refused it.",
		"dial tcp [X]:N: connectex: No connection could be made because the target machine actively refused it."},
	{"go timeout a", "https://github.com/kubernetes-retired/dashboard/issues/3709",
		"dial tcp 10.96.0.1:443: i/o timeout",
		"dial tcp N.N.N.N:N: i/o timeout"},
	{"go timeout b", "https://github.com/kubernetes/kubernetes/issues/85498",
		"Get https://k8s.gcr.io/v1/_ping: dial tcp 172.217.218.82:443: i/o timeout",
		"Get https://kNs.gcr.io/vN/_ping: dial tcp N.N.N.N:N: i/o timeout"},
	{"go lookup a", "https://github.com/NebulousLabs/Sia/issues/2039",
		"listen tcp: lookup localhost on 127.0.1.1:53: no such host",
		"listen tcp: lookup localhost on N.N.N.N:N: no such host"},
	{"go lookup b", "https://github.com/karlsen-network/karlsend/issues/46",
		"Error listening to TCP on localhost:9182: listen tcp: lookup localhost on 8.8.8.8:53: no such host",
		"Error listening to TCP on localhost:N: listen tcp: lookup localhost on N.N.N.N:N: no such host"},
	{"go lookup other host a", "https://github.com/beyondcode/herd-community/issues/877",
		"dial tcp: lookup artmesv3.test on 127.0.0.11:53: no such host",
		"dial tcp: lookup artmesvN.test on N.N.N.N:N: no such host"},
	{"go lookup other host b", "https://github.com/krakend/krakend-ce/issues/514",
		"dial tcp: lookup xxxx on 127.0.0.11:53: no such host",
		"dial tcp: lookup xxxx on N.N.N.N:N: no such host"},
	{"go tcp6 unreachable network", "https://github.com/Alvin9999/new-pac/issues/311",
		"dial tcp6 [2a00:1450:4006:804::200d]:443: connectex: A socket operation was attempted to an unreachable network.",
		"dial tcpN [X]:N: connectex: A socket operation was attempted to an unreachable network."},
	{"go tcp6 unreachable host", "https://github.com/Alvin9999/new-pac/issues/311",
		"dial tcp6 [2a00:1450:400e:808::200a]:443: connectex: A socket operation was attempted to an unreachable host",
		"dial tcpN [X]:N: connectex: A socket operation was attempted to an unreachable host"},
	{"go panic a", "https://github.com/fiatjaf/njump/issues/65",
		"panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x98 pc=0xe1d30f]",
		"panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV: segmentation violation code=X addr=X pc=X]"},
	{"go panic b", "https://github.com/lisijie/gopub/issues/12",
		"panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4d66bc]",
		"panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV: segmentation violation code=X addr=X pc=X]"},
	{"go stack frame", "https://github.com/heidihoward/ios/issues/15",
		"panic(0x5a6120, 0xc4200100a0)\n\t/usr/local/go/src/runtime/panic.go:500 +0x1a1",
		"panic(X, X) /usr/local/go/src/runtime/panic.go:N +X"},

	// PostgreSQL: the server's log, libpq (psql, psycopg2, pg gem).
	{"pg auth a", "https://github.com/absmach/supermq-devops/issues/129",
		"2023-10-15 10:38:47.697 GMT [509] FATAL:  password authentication failed for user \"postgres\"",
		"N-N-N N:N:N.N GMT [N] FATAL: password authentication failed for user \"postgres\""},
	{"pg auth b", "https://github.com/absmach/supermq-devops/issues/129",
		"2023-10-15 10:38:48.331 GMT [510] FATAL:  password authentication failed for user \"postgres\"",
		"N-N-N N:N:N.N GMT [N] FATAL: password authentication failed for user \"postgres\""},
	{"pg auth other user", "https://github.com/HazyResearch/deepdive/issues/681",
		"psql: FATAL:  password authentication failed for user \"root\"",
		"psql: FATAL: password authentication failed for user \"root\""},
	{"libpq refused", "https://github.com/tines/rails-pg-adapter/pull/15",
		"connection to server at \"10.1.209.231\", port 5432 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
		"connection to server at \"N.N.N.N\", port N failed: Connection refused Is the server running on that host and accepting TCP/IP connections?"},
	{"libpq refused windows", "https://github.com/EnterpriseDB/edb-installers/issues/563",
		"psql: error: connection to server at \"localhost\" (::1), port 5432 failed: Connection refused (0x0000274D/10061)",
		"psql: error: connection to server at \"localhost\" (X), port N failed: Connection refused (X/N)"},
	{"libpq old refused", "https://github.com/pgadmin-org/pgadmin4/issues/4837",
		"could not connect to server: Connection refused\nIs the server running on host \"173.18.0.3\" and accepting\nTCP/IP connections on port 5432?",
		"could not connect to server: Connection refused Is the server running on host \"N.N.N.N\" and accepting TCP/IP connections on port N?"},

	// MySQL and ProxySQL.
	{"mysql refused a", "https://github.com/MyCATApache/Mycat2/issues/789",
		"ERROR 2003 (HY000): Can't connect to MySQL server on '139.129.230.219' (111)",
		"ERROR N (HYN): Can't connect to MySQL server on 'N.N.N.N' (N)"},
	{"mysql no route b", "https://github.com/sysown/proxysql/issues/2620",
		"ERROR 2003 (HY000): Can't connect to MySQL server on '172.22.3.112' (113)",
		"ERROR N (HYN): Can't connect to MySQL server on 'N.N.N.N' (N)"},
	{"mysql denied a", "https://github.com/docker-library/mysql/issues/217",
		"Access denied for user 'root'@'172.17.0.1' (using password: YES)",
		"Access denied for user 'root'@'N.N.N.N' (using password: YES)"},
	{"mysql denied b", "https://github.com/urre/wordpress-nginx-docker-compose/issues/50",
		"Access denied for user 'root'@'172.18.0.2' (using password: YES)",
		"Access denied for user 'root'@'N.N.N.N' (using password: YES)"},
	{"mysql denied uuid user", "https://github.com/docker-library/mysql/issues/217",
		"Access denied for user 'c77512ad-9b1d-4782-81a4-9c0c7f90c54a'@'172.21.0.7'",
		"Access denied for user 'X'@'N.N.N.N'"},
	{"mysql denied container host", "https://github.com/docker-library/mysql/issues/323",
		"ERROR 1045 (28000): Access denied for user 'root'@'cc5c5b533260' (using password: YES)",
		"ERROR N (N): Access denied for user 'root'@'X' (using password: YES)"},
	{"proxysql", "https://github.com/sysown/proxysql/issues/4148",
		"mysql_connection.cpp:1022:handler(): [ERROR] Failed to mysql_real_connect() on 30:10.1.34.61:3306 , FD (Conn:0 , MyDS:43) , 2002: Can't connect to MySQL server on '10.1.34.61' (111)",
		"mysql_connection.cpp:N:handler(): [ERROR] Failed to mysql_real_connect() on N:N.N.N.N:N , FD (Conn:N , MyDS:N) , N: Can't connect to MySQL server on 'N.N.N.N' (N)"},

	// Redis clients: node_redis, redis-py.
	{"node redis", "https://github.com/vpdb/server/issues/204",
		"Error: Redis connection to 127.0.0.1:6379 failed - connect ECONNREFUSED 127.0.0.1:6379",
		"Error: Redis connection to N.N.N.N:N failed - connect ECONNREFUSED N.N.N.N:N"},
	{"node refused redis", "https://github.com/ArdaGnsrn/chatgpt-telegram/issues/1",
		"Error: connect ECONNREFUSED 127.0.0.1:6379",
		"Error: connect ECONNREFUSED N.N.N.N:N"},
	{"node refused postgres", "https://github.com/Paxa/postbird/issues/124",
		"Error: connect ECONNREFUSED 127.0.0.1:5432",
		"Error: connect ECONNREFUSED N.N.N.N:N"},
	{"redis-py a", "https://github.com/redis/redis-py/issues/2480",
		"redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:30001. Connection refused.",
		"redis.exceptions.ConnectionError: Error N connecting to N.N.N.N:N. Connection refused."},
	{"redis-py b", "https://github.com/redis/redis-py/issues/1466",
		"redis.exceptions.ConnectionError: Error 111 connecting to 10.0.0.1:6379. Connection refused.",
		"redis.exceptions.ConnectionError: Error N connecting to N.N.N.N:N. Connection refused."},
	{"redis-py by name", "https://github.com/redis/redis-py/issues/2168",
		"redis.exceptions.ConnectionError: Error 111 connecting to socrates07.toa:54558. Connection refused.",
		"redis.exceptions.ConnectionError: Error N connecting to socratesN.toa:N. Connection refused."},
	{"python refused", "https://github.com/redis/redis-py/issues/2744",
		"ConnectionRefusedError: [Errno 111] Connection refused",
		"ConnectionRefusedError: [Errno N] Connection refused"},

	// Kubernetes, Docker, systemd, the kernel.
	{"kubelet orphaned pod a", "https://github.com/kubernetes/kubernetes/issues/134075",
		"E0916 08:27:42.356361    2588 kubelet_volumes.go:154] Orphaned pod \"0008e5b2-6008-45b9-89cd-1aa60f896e24\" found, but volume paths are still present on disk : There were a total of 8549 errors similar to this. Turn up verbosity to see them.",
		"EN N:N:N.N N kubelet_volumes.go:N] Orphaned pod \"X\" found, but volume paths are still present on disk : There were a total of N errors similar to this. Turn up verbosity to see them."},
	{"kubelet orphaned pod b", "https://github.com/longhorn/longhorn/issues/485",
		"E0416 19:44:35.803861    2391 kubelet_volumes.go:154] Orphaned pod \"017aa18b-44cb-11e9-84a1-eeeeeeeeeeee\" found, but volume paths are still present on disk : There were a total of 155 errors similar to this. Turn up verbosity to see them.",
		"EN N:N:N.N N kubelet_volumes.go:N] Orphaned pod \"X\" found, but volume paths are still present on disk : There were a total of N errors similar to this. Turn up verbosity to see them."},
	{"kubelet sandbox", "https://github.com/kubernetes/kubeadm/issues/684",
		"kuberuntime_sandbox.go:54] CreatePodSandbox for pod \"kube-scheduler-kickseed_kube-system(69c12074e336b0dbbd0a1666ce05226a)\" failed: rpc error: code = Unknown desc = failed pulling image \"gcr.io/google_containers/pause-amd64:3.0\": Error response from daemon: Get https://gcr.io/v1/_ping: dial tcp 172.217.6.127:443: i/o timeout",
		// cut at MaxCause bytes
		"kuberuntime_sandbox.go:N] CreatePodSandbox for pod \"kube-scheduler-kickseed_kube-system(X)\" failed: rpc error: code = Unknown desc = failed pulling image \"gcr.io/google_containers/pause-amdN:N.N\":"},
	{"k8s backoff a", "https://github.com/apecloud/kubeblocks/issues/4342",
		"Pod pulsar-cluster-bookies-0: Back-off restarting failed container",
		"Pod pulsar-cluster-bookies-N: Back-off restarting failed container"},
	{"k8s backoff b", "https://github.com/apecloud/kubeblocks/issues/4342",
		"Pod pulsar-cluster-bookies-2: Back-off restarting failed container",
		"Pod pulsar-cluster-bookies-N: Back-off restarting failed container"},
	{"oci no such file", "https://github.com/mo-xiaoxi/AWD_CTF_Platform/issues/39",
		"Error response from daemon: OCI runtime create failed: container_linux.go:380: starting container process caused: exec: \"/tmp/run.sh\": stat /tmp/run.sh: no such file or directory: unknown",
		"Error response from daemon: OCI runtime create failed: container_linux.go:N: starting container process caused: exec: \"/tmp/run.sh\": stat /tmp/run.sh: no such file or directory: unknown"},
	{"oci apparmor", "https://github.com/moby/moby/issues/41993",
		"docker: Error response from daemon: OCI runtime create failed: container_linux.go:367: starting container process caused: process_linux.go:495: container init caused: apply apparmor profile: apparmor failed to apply profile: write /proc/self/attr/exec: invalid argument: unknown.",
		// cut at MaxCause bytes
		"docker: Error response from daemon: OCI runtime create failed: container_linux.go:N: starting container process caused: process_linux.go:N: container init caused: apply apparmor profile: apparmor"},
	{"systemd", "https://github.com/grmat/amdgpu-fancontrol/issues/22",
		"mars 02 17:06:31 terence-desktop systemd[1]: amdgpu-fancontrol.service: Main process exited, code=exited, status=1/FAILURE",
		"mars N N:N:N terence-desktop systemd[N]: amdgpu-fancontrol.service: Main process exited, code=exited, status=N/FAILURE"},
	{"oom killer", "https://oneuptime.com/blog/post/2026-01-24-fix-oom-killer-memory-issues/view",
		"[Fri Jan 24 10:15:32 2026] Out of memory: Killed process 12345 (java)\ntotal-vm:8192000kB, anon-rss:4096000kB, file-rss:0kB, shmem-rss:0kB",
		"[Fri Jan N N:N:N N] Out of memory: Killed process N (java) total-vm:NkB, anon-rss:NkB, file-rss:NkB, shmem-rss:NkB"},
	{"clash lookup", "https://github.com/Dreamacro/clash/issues/1732",
		"[TCP] dial 🎯 全球直连 (match DomainSuffix/localhost) to 843b09ef598860bb483ac3c63f4bbe5f.localhost:49249 error: lookup 843b09ef598860bb483ac3c63f4bbe5f.localhost: no such host",
		"[TCP] dial 🎯 全球直连 (match DomainSuffix/localhost) to X.localhost:N error: lookup X.localhost: no such host"},
}

func TestCauseOfRealFailures(t *testing.T) {
	for _, f := range realFailures {
		if got := Cause(f.text); got != f.cause {
			t.Errorf("%s (%s):\nCause(%q)\n = %q\nwant %q", f.name, f.source, f.text, got, f.cause)
		}
	}
}

// TestCausesCollapseAndStayApart: one failure on other hosts, ports,
// pids, pods and instances has one cause; different failures keep
// different ones.
func TestCausesCollapseAndStayApart(t *testing.T) {
	cause := map[string]string{}
	for _, f := range realFailures {
		cause[f.name] = Cause(f.text)
	}
	for _, pair := range [][2]string{
		{"go panic a", "go panic b"},                         // other addresses and program counters
		{"pg auth a", "pg auth b"},                           // other times and pids
		{"mysql denied a", "mysql denied b"},                 // other client hosts
		{"redis-py a", "redis-py b"},                         // other hosts and ports
		{"kubelet orphaned pod a", "kubelet orphaned pod b"}, // other pod UIDs, counts, times
		{"k8s backoff a", "k8s backoff b"},                   // other replicas
		// A number is a number: an errno, a port. A refused Redis and a
		// refused PostgreSQL, or errno 111 (refused) and 113 (no route),
		// have one cause when the rest of their texts is the same.
		{"node refused redis", "node refused postgres"},
		{"mysql refused a", "mysql no route b"},
	} {
		if cause[pair[0]] != cause[pair[1]] {
			t.Errorf("%s and %s have two causes:\n%q\n%q", pair[0], pair[1], cause[pair[0]], cause[pair[1]])
		}
	}
	for _, pair := range [][2]string{
		{"go lookup other host a", "go lookup other host b"}, // other names stay
		{"go tcp6 unreachable network", "go tcp6 unreachable host"},
		{"pg auth a", "pg auth other user"},
		{"go timeout a", "go timeout b"},
		{"oci no such file", "oci apparmor"},
		{"redis-py a", "redis-py by name"},
		{"go ipv6 refused", "libpq refused windows"},
	} {
		if cause[pair[0]] == cause[pair[1]] {
			t.Errorf("%s and %s have one cause: %q", pair[0], pair[1], cause[pair[0]])
		}
	}
	distinct := map[string]bool{}
	for _, c := range cause {
		distinct[c] = true
	}
	if want := len(realFailures) - 8; len(distinct) != want {
		t.Errorf("%d texts have %d causes, want %d", len(realFailures), len(distinct), want)
	}
}

// TestCauseOfRefusedDials: Go's own text of a refused dial, on this
// machine, to two ports: one cause.
func TestCauseOfRefusedDials(t *testing.T) {
	var causes []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Skipf("%s accepted a dial after its listener closed", addr)
		}
		if !strings.Contains(err.Error(), addr) {
			t.Fatalf("the dial's error %q does not name %s", err, addr)
		}
		causes = append(causes, Cause(err.Error()))
	}
	if want := "dial tcp N.N.N.N:N: connect: connection refused"; causes[0] != want || causes[1] != want {
		t.Errorf("the causes of two refused dials: %q, want %q twice", causes, want)
	}
}

// TestCauseOfTheNormalizations: each rule, and what it leaves alone.
func TestCauseOfTheNormalizations(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", ""},
		{" \t\n ", ""},
		{"  a \t\r\n b  ", "a b"},
		{"a\x00b\x7fc\u00a0d\u2028e", "a b c d e"},
		{"bad \xff\xfe byte", "bad \uFFFD\uFFFD byte"},
		{"pid 4242 v1.22.3 10s -7", "pid N vN.N.N Ns -N"},
		{"0x0 0X1F 0xc000012345 0x 0xg", "X X X Nx Nxg"},
		{"deadbeef deadbeef1 1234567a 123456a 12345678", "deadbeef X X Na N"}, // no digit: a word; 7 hex digits, or no letter: numbers
		{"git 3f4e8a9b2c1d sha256:6216f64ab88fc51d311e38c7f69ca3f9aaba621492b4f1fa93ddf63093768845", "git X shaN:X"},
		{"id 550e8400-e29b-41d4-a716-446655440000.", "id X."},
		{"id 550e8400-e29b-41d4-a716-446655440000a", "id X-eNb-NdN-aN-X"}, // a longer word: no UUID
		{"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"},
		{"[::1]:80 fe80::1%eth0 ::ffff:10.0.0.1 2001:db8:0:0:0:0:2:1 fe80::1: x", "[X]:N X%ethN X.N.N.N X X: x"},
		{"at 10:15:32, mac 00:1a:2b:3c:4d:5e", "at N:N:N, mac X"},
		{"std::io::Error ::: a::b", "std::io::Error ::: a::b"},
		{"12345::1g", "N::Ng"},
		{"٣ ３", "٣ ３"}, // digits of other scripts stay
	} {
		if got := Cause(tc.text); got != tc.want {
			t.Errorf("Cause(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestCauseIsBounded: a long text's cause is cut at MaxCause bytes, on a
// character's boundary, with no space at its end.
func TestCauseIsBounded(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{strings.Repeat("a", 300), strings.Repeat("a", MaxCause)},
		{strings.Repeat("a", 199) + "é", strings.Repeat("a", 199)},
		{strings.Repeat("a", 198) + "é", strings.Repeat("a", 198) + "é"},
		{strings.Repeat("a", 199) + " b", strings.Repeat("a", 199)},
		{strings.Repeat("a", 199) + "\xff", strings.Repeat("a", 199)},
		{strings.Repeat("1 ", 300), strings.TrimSpace(strings.Repeat("N ", MaxCause/2))},
		{strings.Repeat("9", 1<<20) + " x", "N x"},
	} {
		if got := Cause(tc.text); got != tc.want {
			t.Errorf("Cause(%q...) = %q (%d bytes), want %q", tc.text[:10], got, len(got), tc.want)
		}
	}
}

// failedRun is a failure that tells how a program ended.
type failedRun struct {
	msg string
	x   Exit
}

func (e *failedRun) Error() string     { return e.msg }
func (e *failedRun) ProgramExit() Exit { return e.x }

// TestCauseOfAProgramsExit: the cause of a program's end is its exit
// status or signal and its last line on stderr that is not blank, from
// the error or from its Text.
func TestCauseOfAProgramsExit(t *testing.T) {
	three, zero := 3, 0
	for _, tc := range []struct {
		x    Exit
		want string
	}{
		{Exit{ExitCode: &three, StderrTail: "starting\nFATAL: could not connect to db at 10.0.0.5:5432\n"},
			"exit status N: FATAL: could not connect to db at N.N.N.N:N"},
		{Exit{ExitCode: &zero, StderrTail: "a\nlast words  \n \t\n\n"}, "exit status N: last words"},
		{Exit{ExitCode: &three}, "exit status N"},
		{Exit{ExitCode: &three, StderrTail: "\n \n"}, "exit status N"},
		{Exit{Signal: "SEGV", StderrTail: "no newline at the end"}, "signal SEGV: no newline at the end"},
		{Exit{Signal: "KILL", OOMKilled: true}, "signal KILL (oom killed)"},
		{Exit{Signal: "34"}, "signal N"},
		{Exit{StderrTail: "tail alone\n"}, "sh ended at 0x1f"}, // neither status nor signal: the message
	} {
		err := fmt.Errorf("wrapped: %w", &failedRun{msg: "sh ended at 0x1f", x: tc.x})
		want := tc.want
		if tc.x.ExitCode == nil && tc.x.Signal == "" {
			want = "wrapped: sh ended at X"
		}
		if got := CauseOf(err); got != want {
			t.Errorf("CauseOf(%+v) = %q, want %q", tc.x, got, want)
		}
		if got := Cause(Text(err)); got != want {
			t.Errorf("Cause(Text(%+v)) = %q, want %q", tc.x, got, want)
		}
		if got := CauseOf(Restore(Text(err), nil)); got != want {
			t.Errorf("CauseOf(Restore(Text(%+v))) = %q, want %q", tc.x, got, want)
		}
	}
	if got := CauseOf(nil); got != "" {
		t.Errorf("CauseOf(nil) = %q", got)
	}
	if got := CauseOf(errors.New("dial tcp 10.0.9.1:5433: connect: connection refused")); got != "dial tcp N.N.N.N:N: connect: connection refused" {
		t.Errorf("CauseOf of a plain error = %q", got)
	}
	if got := Cause("a\x00{\"exit_code\":"); got != "a {\"exit_code\":" {
		t.Errorf("Cause of a text with a broken Exit = %q", got)
	}
}

// TestCauseAllocatesItsResultAlone: a cause costs one allocation.
func TestCauseAllocatesItsResultAlone(t *testing.T) {
	text := realFailures[0].text
	if n := testing.AllocsPerRun(100, func() { _ = Cause(text) }); n != 1 {
		t.Errorf("Cause allocates %v times, want 1", n)
	}
	err := errors.New(text)
	if n := testing.AllocsPerRun(100, func() { _ = CauseOf(err) }); n != 1 {
		t.Errorf("CauseOf allocates %v times, want 1", n)
	}
}

func BenchmarkCause(b *testing.B) {
	text := realFailures[len(realFailures)-1].text
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Cause(text)
	}
}

// FuzzCause: a cause never panics, is at most MaxCause bytes, is valid
// UTF-8 with no space at either end nor two in a row, has no ASCII digit,
// and is its own cause.
func FuzzCause(f *testing.F) {
	for _, r := range realFailures {
		f.Add(r.text)
	}
	f.Add("a\x00{\"exit_code\":3,\"stderr_tail\":\"x 10.0.0.1:5\\n\"}")
	f.Add("a\x00{\"signal\":\"a1:\",\"stderr_tail\":\"::1\"}")
	f.Add(strings.Repeat("a:", 150) + "1")
	f.Fuzz(func(t *testing.T, text string) {
		c := Cause(text)
		if len(c) > MaxCause {
			t.Fatalf("Cause(%q) is %d bytes", text, len(c))
		}
		if !utf8.ValidString(c) {
			t.Fatalf("Cause(%q) = %q is not valid UTF-8", text, c)
		}
		if strings.TrimSpace(c) != c || strings.Contains(c, "  ") {
			t.Fatalf("Cause(%q) = %q has spaces at an end or two in a row", text, c)
		}
		if strings.ContainsAny(c, "0123456789") {
			t.Fatalf("Cause(%q) = %q has a digit", text, c)
		}
		if again := Cause(c); again != c {
			t.Fatalf("Cause(%q) = %q, whose cause is %q", text, c, again)
		}
	})
}
