// SPDX-License-Identifier: MIT
// TLS client for tls: servers (OpenSSL): handshake with the server's
// certificate checked, then locked reads and writes on a non-blocking socket.
#include "tls.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#define HANDSHAKE_MS 10000 /* the daemon's own limit for the handshake and Auth */
/* Bytes per send and recv: 16 KiB records one system call each cost a 64
 * MiB transfer over loopback most of its speed. */
#define SOCK_BUF (256u << 10)

/*
 * OpenSSL allows one call on an SSL object at a time, and the ICD has a
 * writer (under send_lock) and a reader (the leader, or the notification
 * thread) per channel at once: each call holds `lock`, and nobody holds it
 * while waiting for the socket.
 */
struct cmx_tls {
	SSL *ssl;
	int fd;
	pthread_mutex_t lock;
};

/* ---- a socket BIO that never raises SIGPIPE in the application ---- */

static int bio_write(BIO *b, const char *buf, int len)
{
	ssize_t r = send((int)(intptr_t)BIO_get_data(b), buf, (size_t)len, MSG_NOSIGNAL);

	BIO_clear_retry_flags(b);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		BIO_set_retry_write(b);
	return (int)r;
}

static int bio_read(BIO *b, char *buf, int len)
{
	ssize_t r = recv((int)(intptr_t)BIO_get_data(b), buf, (size_t)len, 0);

	BIO_clear_retry_flags(b);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		BIO_set_retry_read(b);
	return (int)r;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	return cmd == BIO_CTRL_FLUSH;
}

static int bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_init(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "clmux socket");

	if (m && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
	    BIO_meth_set_ctrl(m, bio_ctrl) && BIO_meth_set_create(m, bio_create))
		bio_method = m;
	else
		BIO_meth_free(m);
}

/* ---- the link ---- */

/* Waits until the socket can do what OpenSSL asked for after r; 0, or -1
 * (errno set) when the call failed for good. */
static int await(struct cmx_tls *t, int r, int timeout_ms)
{
	struct pollfd p = { .fd = t->fd };
	int n;

	switch (SSL_get_error(t->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		p.events = POLLIN;
		break;
	case SSL_ERROR_WANT_WRITE:
		p.events = POLLOUT;
		break;
	case SSL_ERROR_SYSCALL:
		if (!errno)
			errno = ECONNRESET;
		ERR_clear_error();
		return -1;
	default:
		errno = ECONNRESET;
		ERR_clear_error();
		return -1;
	}
	pthread_mutex_unlock(&t->lock);
	while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&t->lock);
	if (n == 0)
		errno = ETIMEDOUT;
	return n > 0 ? 0 : -1;
}

/* Sends the records gathered in the write buffer; 0, or -1 with errno. */
static int flush(struct cmx_tls *t)
{
	BIO *b = SSL_get_wbio(t->ssl);
	struct pollfd p = { .fd = t->fd, .events = POLLOUT };

	while (BIO_flush(b) <= 0) {
		if (!BIO_should_retry(b)) {
			errno = ECONNRESET;
			return -1;
		}
		pthread_mutex_unlock(&t->lock);
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
		pthread_mutex_lock(&t->lock);
	}
	return 0;
}

ssize_t cmx_tls_send(struct cmx_tls *t, const struct iovec *iov, size_t n)
{
	size_t total = 0;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < n; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left) {
			int len = left > INT_MAX ? INT_MAX : (int)left;
			int r = SSL_write(t->ssl, p, len);

			if (r > 0) {
				p += r;
				left -= (size_t)r;
				total += (size_t)r;
			} else if (await(t, r, -1)) {
				pthread_mutex_unlock(&t->lock);
				return -1;
			}
		}
	}
	if (flush(t)) {
		pthread_mutex_unlock(&t->lock);
		return -1;
	}
	pthread_mutex_unlock(&t->lock);
	return (ssize_t)total;
}

ssize_t cmx_tls_recv(struct cmx_tls *t, void *buf, size_t len, int waitall)
{
	size_t got = 0;

	pthread_mutex_lock(&t->lock);
	while (got < len) {
		size_t want = len - got;
		int r = SSL_read(t->ssl, (char *)buf + got, want > INT_MAX ? INT_MAX : (int)want);

		if (r > 0) {
			got += (size_t)r;
			if (!waitall)
				break;
			continue;
		}
		if (SSL_get_error(t->ssl, r) == SSL_ERROR_ZERO_RETURN)
			break; /* the daemon closed: end of stream */
		if (got && !waitall && SSL_get_error(t->ssl, r) == SSL_ERROR_WANT_READ)
			break;
		if (await(t, r, -1)) {
			pthread_mutex_unlock(&t->lock);
			return got ? (ssize_t)got : -1;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return (ssize_t)got;
}

/* Why a handshake failed, in one line. */
static void failure(struct cmx_tls *t, const char *ca, char *why, size_t whylen)
{
	long v = SSL_get_verify_result(t->ssl);
	unsigned long e = ERR_peek_error();
	char reason[160] = "connection closed";

	if (v != X509_V_OK) {
		snprintf(why, whylen, "TLS: the daemon's certificate is not trusted (%s; CA %s)",
			 X509_verify_cert_error_string(v), ca ? ca : "the system's");
	} else {
		if (e)
			ERR_error_string_n(e, reason, sizeof(reason));
		snprintf(why, whylen, "TLS handshake failed: %s", reason);
	}
	ERR_clear_error();
}

int cmx_tls_connect(int fd, const char *host, const char *ca, struct cmx_tls **out, char *why,
		    size_t whylen)
{
	struct cmx_tls *t = calloc(1, sizeof(*t));
	struct in6_addr ip;
	SSL_CTX *ctx = NULL;
	BIO *bio = NULL, *wbio = NULL, *wbuf = NULL;
	int fl = fcntl(fd, F_GETFL), r, e = -ENOMEM;

	*out = NULL;
	pthread_once(&bio_once, bio_method_init);
	if (!t || !bio_method || fl < 0 || !(ctx = SSL_CTX_new(TLS_client_method())))
		goto fail;
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (ca ? SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1
	       : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		snprintf(why, whylen, "TLS: cannot load the CA file %s", ca ? ca : "(system)");
		e = -EINVAL;
		goto fail;
	}
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, SOCK_BUF);
	t->ssl = SSL_new(ctx);
	bio = BIO_new(bio_method);
	wbio = BIO_new(bio_method);
	wbuf = BIO_new(BIO_f_buffer());
	if (!t->ssl || !bio || !wbio || !wbuf || BIO_set_write_buffer_size(wbuf, SOCK_BUF) != 1)
		goto fail;
	BIO_set_data(bio, (void *)(intptr_t)fd);
	BIO_set_data(wbio, (void *)(intptr_t)fd);
	/* Reads straight from the socket (OpenSSL reads ahead); records to
	 * send gather in wbuf until flush(). The SSL owns them from here. */
	SSL_set_bio(t->ssl, bio, BIO_push(wbuf, wbio));
	bio = wbio = wbuf = NULL;
	/* The certificate must name what the guest dialled: an address
	 * literal as an IP SAN, a name as a DNS SAN (and SNI). */
	if (inet_pton(AF_INET, host, &ip) == 1 || inet_pton(AF_INET6, host, &ip) == 1) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host) != 1)
			goto fail;
	} else if (SSL_set1_host(t->ssl, host) != 1 || SSL_set_tlsext_host_name(t->ssl, host) != 1) {
		goto fail;
	}
	if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		e = -errno;
		goto fail;
	}
	t->fd = fd;
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_lock(&t->lock);
	while ((r = SSL_connect(t->ssl)) != 1) {
		int wait_failed = SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ &&
				  SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_WRITE;
		if (wait_failed || await(t, r, HANDSHAKE_MS)) {
			if (!wait_failed && errno == ETIMEDOUT)
				snprintf(why, whylen, "TLS handshake: no answer in %d s",
					 HANDSHAKE_MS / 1000);
			else
				failure(t, ca, why, whylen);
			pthread_mutex_unlock(&t->lock);
			pthread_mutex_destroy(&t->lock);
			e = -ECONNREFUSED;
			goto fail;
		}
	}
	pthread_mutex_unlock(&t->lock);
	SSL_CTX_free(ctx); /* the SSL keeps its own reference */
	*out = t;
	return 0;
fail:
	if (e == -ENOMEM && !*why)
		snprintf(why, whylen, "TLS: out of memory");
	BIO_free(bio);
	BIO_free(wbio);
	BIO_free(wbuf);
	if (t)
		SSL_free(t->ssl);
	SSL_CTX_free(ctx);
	free(t);
	ERR_clear_error();
	return e;
}

void cmx_tls_free(struct cmx_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
