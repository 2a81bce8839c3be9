// SPDX-License-Identifier: MIT
// Bare loopback TCP: 64 MiB moved over N streams by send, vmsplice+splice or
// MSG_ZEROCOPY, received with recv; the ceiling clmux's tcp transport sits under.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define MAX_STREAMS 16
#define MAX_REPS    1000
#define STEP	    (1u << 20) /* most bytes of one recv, vmsplice or splice */

enum mode { M_SEND, M_SPLICE, M_ZEROCOPY };

static enum mode mode;
static int nstreams = 1, reps = 20;
static size_t size = 64u << 20;
static int tx_fd[MAX_STREAMS], rx_fd[MAX_STREAMS];
static char *src, *dst;
static pthread_barrier_t start, stop;
static volatile int quit;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static void die(const char *what)
{
	fprintf(stderr, "loopback-bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Stream i carries [lo, hi) of the buffer. */
static void span(int i, size_t *lo, size_t *hi)
{
	*lo = size / (size_t)nstreams * (size_t)i;
	*hi = i == nstreams - 1 ? size : size / (size_t)nstreams * (size_t)(i + 1);
}

static void send_span(int fd, int pipe_fd[2], size_t off, size_t end)
{
	while (off < end) {
		size_t n = end - off;
		ssize_t w;

		if (mode == M_SPLICE) {
			struct iovec v = {src + off, n < STEP ? n : STEP};
			ssize_t left;

			/* Page references into the pipe, then into the socket. */
			w = vmsplice(pipe_fd[1], &v, 1, 0);
			if (w < 0)
				die("vmsplice");
			for (left = w; left;) {
				ssize_t m =
				    splice(pipe_fd[0], NULL, fd, NULL, (size_t)left, SPLICE_F_MORE);
				if (m <= 0)
					die("splice");
				left -= m;
			}
		} else {
			w = send(fd, src + off, n, mode == M_ZEROCOPY ? MSG_ZEROCOPY : 0);
			if (w < 0 && errno == ENOBUFS && mode == M_ZEROCOPY) {
				/* Completions pile up: take them and go on. */
				char cb[4096];
				struct msghdr mh = {.msg_control = cb,
						    .msg_controllen = sizeof(cb)};
				recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
				continue;
			}
			if (w < 0)
				die("send");
		}
		off += (size_t)w;
	}
}

static void *tx_main(void *arg)
{
	int i = (int)(long)arg, pipe_fd[2] = {-1, -1};
	size_t lo, hi;

	if (mode == M_SPLICE) {
		if (pipe(pipe_fd))
			die("pipe");
		fcntl(pipe_fd[1], F_SETPIPE_SZ, STEP);
	}
	span(i, &lo, &hi);
	for (;;) {
		pthread_barrier_wait(&start);
		if (quit)
			return NULL;
		send_span(tx_fd[i], pipe_fd, lo, hi);
		pthread_barrier_wait(&stop);
	}
}

static void *rx_main(void *arg)
{
	int i = (int)(long)arg;
	size_t lo, hi;

	span(i, &lo, &hi);
	for (;;) {
		pthread_barrier_wait(&start);
		if (quit)
			return NULL;
		for (size_t off = lo; off < hi;) {
			size_t n = hi - off;
			ssize_t r = recv(rx_fd[i], dst + off, n < STEP ? n : STEP, 0);
			if (r <= 0)
				die("recv");
			off += (size_t)r;
		}
		pthread_barrier_wait(&stop);
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr, "usage: clmux-loopback-bench [--mode send|splice|zerocopy] [--streams N]\n"
			"                            [--reps N] [--mib N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	pthread_t th[2 * MAX_STREAMS];
	double gbs[MAX_REPS], c0, cpu, t;
	int one = 1, l;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--mode")) {
			i++;
			mode = !strcmp(argv[i], "send")	      ? M_SEND
			       : !strcmp(argv[i], "splice")   ? M_SPLICE
			       : !strcmp(argv[i], "zerocopy") ? M_ZEROCOPY
							      : (usage(), M_SEND);
		} else if (!strcmp(argv[i], "--streams")) {
			nstreams = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--reps")) {
			reps = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--mib")) {
			size = (size_t)atoi(argv[++i]) << 20;
		} else {
			usage();
		}
	}
	if (nstreams < 1 || nstreams > MAX_STREAMS || reps < 1 || reps > MAX_REPS || !size)
		usage();
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, MAX_STREAMS) ||
	    getsockname(l, (struct sockaddr *)&a, &alen))
		die("listen");
	for (int i = 0; i < nstreams; i++) {
		tx_fd[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (tx_fd[i] < 0 || connect(tx_fd[i], (struct sockaddr *)&a, sizeof(a)))
			die("connect");
		setsockopt(tx_fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (mode == M_ZEROCOPY &&
		    setsockopt(tx_fd[i], SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)))
			die("SO_ZEROCOPY");
		rx_fd[i] = accept(l, NULL, NULL);
		if (rx_fd[i] < 0)
			die("accept");
	}
	src = aligned_alloc(4096, size);
	dst = aligned_alloc(4096, size);
	if (!src || !dst)
		die("memory");
	memset(src, 1, size);
	memset(dst, 2, size);
	pthread_barrier_init(&start, NULL, (unsigned)(2 * nstreams + 1));
	pthread_barrier_init(&stop, NULL, (unsigned)(2 * nstreams + 1));
	for (long i = 0; i < nstreams; i++) {
		pthread_create(&th[2 * i], NULL, rx_main, (void *)i);
		pthread_create(&th[2 * i + 1], NULL, tx_main, (void *)i);
	}
	c0 = cpu_s();
	for (int r = 0; r < reps; r++) {
		t = now();
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&stop);
		gbs[r] = (double)size / (now() - t) / 1e9;
	}
	cpu = cpu_s() - c0;
	quit = 1;
	pthread_barrier_wait(&start);
	for (int i = 0; i < 2 * nstreams; i++)
		pthread_join(th[i], NULL);
	qsort(gbs, (size_t)reps, sizeof(gbs[0]), cmp);
	t = now();
	memcpy(dst, src, size);
	t = now() - t;
	printf("%s x%d, %zu MiB: median %.2f GB/s, best %.2f; CPU %.0f ns/KiB (both sides); "
	       "memcpy %.2f GB/s\n",
	       mode == M_SEND	  ? "send"
	       : mode == M_SPLICE ? "splice"
				  : "zerocopy",
	       nstreams, size >> 20, gbs[reps / 2], gbs[reps - 1],
	       cpu * 1e9 / ((double)size * reps / 1024), (double)size / t / 1e9);
	return 0;
}
