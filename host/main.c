// SPDX-License-Identifier: MIT
// clmuxd: serves one physical OpenCL device to guest sessions.
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr.h"
#include "admin.h"
#include "conffile.h"
#include "conn.h"
#include "exec.h"
#include "executor.h"
#include "kprintf.h"
#include "pinned.h"
#include "privilege.h"
#include "listener.h"
#include "reaper.h"
#include "log.h"
#include "scheduler.h"
#include "server.h"
#include "session.h"
#include "ivshmem.h"
#include "vhost.h"

#define MAX_LISTEN 1024 /* one per tenant, bind-mounted into its container */
#define MAX_VHOST_SPECS 16

struct cmx_server *cmx_srv;

static struct cmx_listener listeners[MAX_LISTEN];
static unsigned nlisteners;
static struct cmx_io sig_io, tick_io;
static struct signalfd_siginfo sig_info;
static int sig_fd = -1;
static struct __kernel_timespec tick = { .tv_nsec = 20 * 1000 * 1000 };

/* While draining: exit once no session and no job is left, and the device
 * has finished what the scheduler let onto it (for at most 5 s: a command
 * stuck behind a user event nobody will set must not hold the exit). */
static void tick_done(struct cmx_io *io, int res, unsigned flags)
{
	static unsigned ticks;

	if (!cmx_srv->nsessions && !cmx_executor_busy(cmx_srv->exec) && !cmx_reap_busy() &&
	    (!cmx_sched_busy(cmx_srv) || ++ticks > 250)) {
		cmx_loop_stop(cmx_srv->loop);
		return;
	}
	io_uring_prep_timeout(cmx_loop_sqe(cmx_srv->loop, &tick_io), &tick, 0, 0);
}

static void drain(void)
{
	cmx_srv->draining = 1;
	cmx_admin_close(cmx_srv);
	for (unsigned i = 0; i < nlisteners; i++)
		cmx_listener_close(&listeners[i]);
	cmx_vhost_drain();
	cmx_ivshmem_drain();
	/* Ending each call channel releases its session's objects. */
	while (cmx_srv->sessions) {
		struct cmx_session *s = cmx_srv->sessions;
		for (; s && s->closed; s = s->next)
			;
		if (!s)
			break;
		if (s->conn)
			cmx_conn_kill(s->conn, "daemon stopping");
		else
			cmx_session_close(s);
	}
	tick_done(&tick_io, 0, 0);
}

static void sig_done(struct cmx_io *io, int res, unsigned flags)
{
	if (res == sizeof(sig_info)) {
		cmx_info("signal %u: draining and exiting", sig_info.ssi_signo);
		drain();
		return;
	}
	io_uring_prep_read(cmx_loop_sqe(cmx_srv->loop, &sig_io), sig_fd, &sig_info, sizeof(sig_info), 0);
}

/*
 * Tenants: from the config file when there is one (--config, or the default
 * path if it exists); without one, every peer is tenant "default"'s, with
 * no limits, as before tenants existed. A listener's tenant=NAME that the
 * config does not define is created with the default quotas.
 */
static int tenants_setup(struct cmx_server *srv, const char *config)
{
	char why[200];

	srv->started_ns = cmx_now_ns();
	cmx_quota_unlimited(&srv->tenants.defaults);
	if (config || !access(CMX_CONFIG_DEFAULT, F_OK)) {
		const char *path = config ? config : CMX_CONFIG_DEFAULT;
		if (cmx_config_load(path, &srv->tenants, why, sizeof(why))) {
			fprintf(stderr, "clmuxd: %s: %s\n", path, why);
			return -EINVAL;
		}
		srv->config_path = path;
	} else {
		strcpy(srv->tenants.fallback, "default");
		cmx_tenant_get(&srv->tenants, "default");
	}
	for (unsigned i = 0; i < nlisteners; i++) {
		struct cmx_listener *l = &listeners[i];
		int e = cmx_addr_opt(&l->addr, "tenant", l->tenant, sizeof(l->tenant));
		if (e == -ENOENT)
			continue;
		if (e || !cmx_tenant_get(&srv->tenants, l->tenant)) {
			fprintf(stderr, "clmuxd: --listen %s: bad tenant name\n", l->name);
			return -EINVAL;
		}
	}
	/* Tenants to be fair to: a config, several tenants, or tokens that
	 * name tenants. A daemon of one tenant pays no profiling. */
	srv->profile = srv->config_path || srv->tenants.count > 1;
	for (unsigned i = 0; i < nlisteners && !srv->profile; i++) {
		char v[8];
		srv->profile = cmx_addr_opt(&listeners[i].addr, "tokens", v, sizeof(v)) != -ENOENT;
	}
	return 0;
}

/* The admin socket: asked for, or the default one when this daemon can have
 * it (root, no other daemon serving it). */
static void admin_setup(struct cmx_server *srv, const char *path)
{
	int e;

	if (path && !strcmp(path, "none"))
		return;
	if (!path) {
		path = CMX_ADMIN_DEFAULT;
		mkdir("/run/clmux", 0755);
	}
	e = cmx_admin_listen(srv, path);
	if (e)
		cmx_warn("no admin socket at %s: %s", path, strerror(-e));
	else
		cmx_info("admin socket %s (root only)", path);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: clmuxd --listen ADDR [--listen ...] [--config FILE] [--admin PATH]\n"
		   "              [--metrics ADDR] [--device SPEC] [--threads N] [--user NAME]\n"
		   "  --listen ADDR   where guests connect, one of\n"
		   "                    unix:PATH[,tokens=FILE]\n"
		   "                    vsock:PORT[,tokens=FILE]            (AF_VSOCK, any CID)\n"
		   "                    vsock-uds:UDS_PORT[,cid=N][,tokens=FILE]  (Firecracker,\n"
		   "                                      Cloud Hypervisor hybrid vsock)\n"
		   "                    tcp:ADDR:PORT,tokens=FILE          (IPv6: tcp:[ADDR]:PORT)\n"
		   "                    tcp:ADDR:PORT,tokens=FILE,tls=CERT:KEY  (TLS 1.3)\n"
		   "                    ivshmem:PATH,size=SIZE[,slots=N][,poll=US]  (QEMU ivshmem-plain)\n"
		   "                  each may end in ,tenant=NAME: every peer of it is NAME's;\n"
		   "                  a path takes ,mode=OCTAL,group=NAME (default: the umask's;\n"
		   "                  ivshmem 0600)\n"
		   "  --config FILE   tenants and quotas (default " CMX_CONFIG_DEFAULT " if present)\n"
		   "  --admin PATH    root-only socket for clmuxctl (default " CMX_ADMIN_DEFAULT ");\n"
		   "                  'none' serves none\n"
		   "  --metrics ADDR  Prometheus text on unix:PATH (0600) or tcp:127.0.0.1:PORT\n"
		   "                  (another address only with ,public; default off)\n"
		   "  --sched-window US  device time let onto the device at once (default 2000)\n"
		   "  --device SPEC   gpu | cpu | N | PLATFORM[:N]  (default: first GPU, else first device)\n"
		   "  --threads N     most threads for blocking calls (default 64)\n"
		   "  --user NAME     after opening everything as root, run as NAME with NAME's\n"
		   "                  groups (the GPU's: video, render)\n"
		   "  CLMUX_LOG=debug|info|warn|err sets the log level (default info)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' }, { "device", required_argument, NULL, 'd' },
		{ "threads", required_argument, NULL, 't' }, { "help", no_argument, NULL, 'h' },
		{ "config", required_argument, NULL, 'c' }, { "admin", required_argument, NULL, 'a' },
		{ "metrics", required_argument, NULL, 'm' },
		{ "sched-window", required_argument, NULL, 'w' },
		{ "user", required_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	const char *device = NULL, *vhost_specs[MAX_VHOST_SPECS];
	const char *config = NULL, *admin = NULL, *metrics = NULL, *user = NULL;
	char why[200];
	unsigned nvhost = 0;
	unsigned threads = 64;
	uint64_t window_us = CMX_SCHED_WINDOW_US;
	struct cmx_server srv = { 0 };
	sigset_t mask;
	int opt, e;

	cmx_log_init("clmuxd", CMX_LOG_INFO);
	/* The clmux ICD, if installed here, must not connect back to us. */
	setenv("CLMUX_DISABLE", "1", 1);
	cmx_srv = &srv;
	while ((opt = getopt_long(argc, argv, "l:d:t:hc:a:m:w:u:", opts, NULL)) != -1) {
		char why[256];
		switch (opt) {
		case 'l':
			if ((cmx_vhost_is_spec(optarg) || cmx_ivshmem_is_spec(optarg)) &&
			    nvhost < MAX_VHOST_SPECS) {
				vhost_specs[nvhost++] = optarg; /* opened once the loop runs */
				break;
			}
			if (nlisteners == MAX_LISTEN ||
			    cmx_listener_init(&listeners[nlisteners], optarg, why, sizeof(why))) {
				fprintf(stderr, "clmuxd: --listen %s: %s\n", optarg,
					nlisteners == MAX_LISTEN ? "too many" : why);
				return 2;
			}
			nlisteners++;
			break;
		case 'd':
			device = optarg;
			break;
		case 'c':
			config = optarg;
			break;
		case 'a':
			admin = optarg;
			break;
		case 'm':
			metrics = optarg;
			break;
		case 'w':
			window_us = strtoull(optarg, NULL, 10);
			break;
		case 'u':
			user = optarg;
			break;
		case 't':
			threads = (unsigned)strtoul(optarg, NULL, 10);
			if (!threads)
				threads = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if ((!nlisteners && !nvhost) || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (tenants_setup(&srv, config))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	/* Blocked before any thread starts, so only the signalfd sees them. */
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	if (cmx_device_open(&srv, device))
		return 1;
	e = cmx_loop_create(&srv.loop);
	if (e || cmx_executor_create(srv.loop, threads, &srv.exec) ||
	    cmx_sched_create(&srv, window_us)) {
		cmx_err("cannot start the io_uring loop: %s", strerror(-e));
		return 1;
	}
	/* Kernel printf output: the loop reads fd 1 (host/kprintf.c). */
	e = cmx_kprintf_init(srv.loop);
	if (e)
		cmx_warn("kernel printf output stays on stdout: %s", strerror(-e));
	/* A GPU's large transfers go through pinned staging (host/pinned.c). */
	if (cmx_pinned_start(srv.devices[0]))
		cmx_warn("no copy threads: transfers stay pageable");
	for (unsigned i = 0; i < nlisteners; i++)
		if (cmx_listener_start(&listeners[i]))
			return 1;
	for (unsigned i = 0; i < nvhost; i++) {
		char why[200];
		if ((cmx_ivshmem_is_spec(vhost_specs[i]) ? cmx_ivshmem_listen : cmx_vhost_listen)(
			    &srv, vhost_specs[i], why, sizeof(why))) {
			cmx_err("--listen %s: %s", vhost_specs[i], why);
			return 1;
		}
	}
	admin_setup(&srv, admin);
	if (metrics && cmx_metrics_listen(&srv, metrics, why, sizeof(why))) {
		cmx_err("--metrics %s: %s", metrics, why);
		return 1;
	}
	/* Everything that needs root is open: the loop serves as --user. */
	if (user && cmx_privilege_drop(user, why, sizeof(why))) {
		cmx_err("%s", why);
		return 1;
	}
	if (user)
		cmx_info("running as %s (uid %u)", user, (unsigned)getuid());
	sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	sig_io.cb = sig_done;
	tick_io.cb = tick_done;
	sig_done(&sig_io, 0, 0);
	e = cmx_loop_run(srv.loop);
	if (e)
		cmx_err("loop: %s", strerror(-e));
	cmx_kprintf_fini();
	cmx_watch_report();
	cmx_pinned_stop();
	cmx_sched_destroy(&srv);
	cmx_executor_destroy(srv.exec);
	cmx_loop_destroy(srv.loop);
	for (unsigned i = 0; i < nlisteners; i++)
		cmx_listener_fini(&listeners[i]);
	cmx_tenants_fini(&srv.tenants);
	cmx_info("stopped");
	return e ? 1 : 0;
}
