// SPDX-License-Identifier: MIT
// TLS for tcp listeners: OpenSSL on a non-blocking socket, driven by io_uring
// readiness polls on the loop, carrying a connection's bytes (a conn mover).
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "listener.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "tenant.h"

/* Plaintext handed to the connection per SSL_read, and the most bytes one
 * readiness event decrypts or encrypts before the loop serves others (as
 * host/conn.c's RX_BULK_STEP and TX_STEP bound a plain socket's steps). */
#define READ_CHUNK (64u << 10)
#define STEP (1u << 20)
/* Bytes read from, and written to, the socket per system call: records
 * are 16 KiB, and one send or recv each costs a 64 MiB transfer over
 * loopback most of its speed (0.3 GB/s against 1.5 with these). */
#define SOCK_BUF (256u << 10)

struct cmx_tls_ctx {
	SSL_CTX *ssl;
};

/*
 * One TLS connection. The conn owns a reference until it ends (mover
 * close), and each poll in flight holds one; the socket and the SSL object
 * go when the last is dropped. Only the loop thread touches it.
 */
struct link {
	struct cmx_server *srv;
	struct cmx_conn *conn; /* NULL once the connection ended */
	SSL *ssl;
	int fd;
	int refs;
	int ready;		/* the handshake is done */
	int flushing;		/* encrypted bytes wait in the write buffer */
	int rd_armed, wr_armed; /* a poll (or, rd, a nop) is in flight */
	size_t wr_retry;	/* an SSL_write to repeat with this length, or 0 */
	struct cmx_io rd_io, wr_io;
	/* Decrypted bytes the conn has not taken yet (it holds input back:
	 * its tenant's rate, its session's unread output): buf[kept_off..]. */
	size_t kept_off, kept;
	uint8_t buf[READ_CHUNK];
};

/* The first error in OpenSSL's queue, for one log line (and clears it). */
static const char *ssl_reason(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (!e)
		return "connection closed";
	ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

static int key_private(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		snprintf(err, errlen, "tls key %s: %s", path, strerror(errno));
		return -errno;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		snprintf(err, errlen, "tls key %s: readable or writable by others; chmod o-rw it",
			 path);
		return -EPERM;
	}
	return 0;
}

int cmx_tls_ctx_create(struct cmx_tls_ctx **out, const char *spec, char *err, size_t errlen)
{
	char cert[256], reason[160];
	const char *key = strchr(spec, ':');
	struct cmx_tls_ctx *t;
	int e;

	*out = NULL;
	if (!key || key == spec || !key[1] || (size_t)(key - spec) >= sizeof(cert)) {
		snprintf(err, errlen, "tls=CERT:KEY: two PEM files, the certificate and its key");
		return -EINVAL;
	}
	memcpy(cert, spec, (size_t)(key - spec));
	cert[key - spec] = '\0';
	key++;
	e = key_private(key, err, errlen);
	if (e)
		return e;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->ssl = SSL_CTX_new(TLS_server_method()))) {
		free(t);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Both ends are clmux: TLS 1.3 only, so there is no renegotiation
	 * (a read never has to write, nor a write read) and no session
	 * tickets to send (every connection authenticates anyway). */
	SSL_CTX_set_min_proto_version(t->ssl, TLS1_3_VERSION);
	SSL_CTX_set_num_tickets(t->ssl, 0);
	SSL_CTX_set_mode(t->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
					  SSL_MODE_RELEASE_BUFFERS);
	/* A guest that just goes away is a closed connection, not an error. */
	SSL_CTX_set_options(t->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_read_ahead(t->ssl, 1);
	SSL_CTX_set_default_read_buffer_len(t->ssl, SOCK_BUF);
	if (SSL_CTX_use_certificate_chain_file(t->ssl, cert) != 1) {
		snprintf(err, errlen, "tls certificate %s: %s", cert, ssl_reason(reason, sizeof(reason)));
		e = -EINVAL;
	} else if (SSL_CTX_use_PrivateKey_file(t->ssl, key, SSL_FILETYPE_PEM) != 1 ||
		   SSL_CTX_check_private_key(t->ssl) != 1) {
		snprintf(err, errlen, "tls key %s: %s", key, ssl_reason(reason, sizeof(reason)));
		e = -EINVAL;
	}
	if (e) {
		cmx_tls_ctx_destroy(t);
		return e;
	}
	*out = t;
	return 0;
}

void cmx_tls_ctx_destroy(struct cmx_tls_ctx *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ssl);
	free(t);
}

static void link_put(struct link *k)
{
	if (--k->refs)
		return;
	SSL_free(k->ssl);
	close(k->fd);
	free(k);
}

/* Something went wrong on the stream: the connection ends (and, through
 * the mover's close, so does the link). */
static void link_fail(struct link *k, const char *what)
{
	char reason[160];

	if (!k->conn)
		return;
	if (!k->ready)
		cmx_warn("%s: refused: TLS handshake failed: %s", k->conn->peer.name,
			 what ? what : ssl_reason(reason, sizeof(reason)));
	cmx_conn_kill(k->conn, what ? what : ssl_reason(reason, sizeof(reason)));
	ERR_clear_error();
}

/* Arms a poll for the socket (POLLOUT with wr, else POLLIN); for reads,
 * nop comes back at once. */
static void arm(struct link *k, int wr, int nop)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(k->srv->loop, wr ? &k->wr_io : &k->rd_io);

	if (nop)
		io_uring_prep_nop(sqe);
	else
		io_uring_prep_poll_add(sqe, k->fd, wr ? POLLOUT : POLLIN);
	if (wr)
		k->wr_armed = 1;
	else
		k->rd_armed = 1;
	k->refs++;
}

/* What an SSL call that returned r <= 0 waits for: arms the poll and
 * returns 0, or -EIO for a real failure. */
static int want(struct link *k, int r)
{
	switch (SSL_get_error(k->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		if (!k->rd_armed)
			arm(k, 0, 0);
		return 0;
	case SSL_ERROR_WANT_WRITE:
		if (!k->wr_armed)
			arm(k, 1, 0);
		return 0;
	default:
		return -EIO;
	}
}

/* Decrypts what the socket holds into the connection, at most STEP bytes
 * before coming back on the next loop turn. What the connection does not
 * take (it holds input back) waits in buf, and nothing more is read, until
 * it calls link_resume(): the peer's TCP window fills meanwhile. */
static void link_read(struct link *k)
{
	size_t done = 0;

	while (k->conn) {
		int r;

		if (k->kept) {
			size_t n = cmx_conn_input(k->conn, k->buf + k->kept_off, k->kept);
			k->kept_off += n;
			k->kept -= n;
			if (k->kept)
				return;
			continue;
		}
		if (done >= STEP) {
			/* OpenSSL may hold decrypted bytes the socket no longer
			 * signals: come back on a nop, not a poll. */
			arm(k, 0, 1);
			return;
		}
		r = SSL_read(k->ssl, k->buf, sizeof(k->buf));
		if (r <= 0) {
			if (want(k, r))
				link_fail(k, SSL_get_error(k->ssl, r) == SSL_ERROR_ZERO_RETURN
						     ? "peer closed"
						     : NULL);
			return;
		}
		done += (size_t)r;
		k->kept_off = 0;
		k->kept = (size_t)r;
	}
}

static void link_resume(void *ctx)
{
	struct link *k = ctx;

	if (k->conn && k->ready && !k->rd_armed)
		link_read(k);
}

static void link_handshake(struct link *k)
{
	int r = SSL_accept(k->ssl);

	if (r == 1) {
		k->ready = 1;
		cmx_dbg("%s: TLS %s, %s", k->conn->peer.name, SSL_get_version(k->ssl),
			SSL_get_cipher_name(k->ssl));
		link_read(k);
		if (k->conn)
			cmx_conn_tx_ready(k->conn);
	} else if (want(k, r)) {
		link_fail(k, NULL);
	}
}

/* Writes out the buffered records: 0 when all went; else -EAGAIN (the
 * poll for POLLOUT is armed, `flushing` stays set) or -EIO. */
static int flush(struct link *k)
{
	BIO *b = SSL_get_wbio(k->ssl);

	k->flushing = 1;
	if (BIO_flush(b) > 0) {
		k->flushing = 0;
		return 0;
	}
	if (!BIO_should_retry(b)) {
		k->flushing = 0;
		return -EIO;
	}
	if (!k->wr_armed)
		arm(k, 1, 0);
	return -EAGAIN;
}

static void rd_done(struct cmx_io *io, int res, unsigned flags)
{
	struct link *k = (struct link *)((char *)io - offsetof(struct link, rd_io));

	(void)flags;
	k->rd_armed = 0;
	if (k->conn && res < 0 && res != -ECANCELED && res != -ETIME)
		link_fail(k, strerror(-res));
	else if (k->conn && !k->ready)
		link_handshake(k);
	else if (k->conn)
		link_read(k);
	link_put(k);
}

static void wr_done(struct cmx_io *io, int res, unsigned flags)
{
	struct link *k = (struct link *)((char *)io - offsetof(struct link, wr_io));

	(void)flags;
	k->wr_armed = 0;
	if (k->conn && res < 0 && res != -ECANCELED)
		link_fail(k, strerror(-res));
	else if (k->conn && !k->ready)
		link_handshake(k);
	else if (k->conn && k->flushing && flush(k) == -EIO)
		link_fail(k, "write failed");
	else if (k->conn && !k->flushing)
		cmx_conn_tx_ready(k->conn);
	link_put(k);
}

/* The conn's output: encrypts and writes as much of iov as the socket
 * takes, up to STEP bytes per readiness event. */
static long link_write(void *ctx, const struct iovec *iov, int n)
{
	struct link *k = ctx;
	size_t total = 0;

	/* After the handshake, or once the socket can take more, the conn
	 * is told (cmx_conn_tx_ready()). */
	if (!k->ready || k->wr_armed)
		return 0;
	if (k->flushing && flush(k))
		return k->flushing ? 0 : -EIO;
	for (int i = 0; i < n && total < STEP; i++) {
		size_t off = 0;

		while (off < iov[i].iov_len && total < STEP) {
			size_t len = iov[i].iov_len - off;
			int r;

			if (len > STEP - total)
				len = STEP - total;
			/* After WANT_WRITE OpenSSL wants the same length again
			 * (the bytes are the same: nothing was consumed). */
			if (k->wr_retry && k->wr_retry <= iov[i].iov_len - off)
				len = k->wr_retry;
			if (len > INT32_MAX)
				len = INT32_MAX;
			r = SSL_write(k->ssl, (const char *)iov[i].iov_base + off, (int)len);
			if (r <= 0) {
				k->wr_retry = len;
				if (want(k, r))
					return -EIO;
				k->flushing = 1;
				return (long)total;
			}
			k->wr_retry = 0;
			off += (size_t)r;
			total += (size_t)r;
		}
	}
	if (flush(k) && !k->flushing)
		return -EIO;
	/* A full step: the rest when the socket is writable, after others. */
	if (total >= STEP && !k->wr_armed)
		arm(k, 1, 0);
	return (long)total;
}

static void link_close(void *ctx)
{
	struct link *k = ctx;

	k->conn = NULL;
	/* Wakes the polls in flight; their completions drop their refs. */
	shutdown(k->fd, SHUT_RDWR);
	link_put(k);
}

static const struct cmx_conn_mover link_mover = {
    .write = link_write, .close = link_close, .resume = link_resume};

/* Reads straight from the socket (OpenSSL reads ahead into its own
 * buffer); writes gather in a buffer that flush() sends. */
static int set_bios(SSL *ssl, int fd)
{
	BIO *r = BIO_new_socket(fd, BIO_NOCLOSE), *w = BIO_new_socket(fd, BIO_NOCLOSE);
	BIO *buf = BIO_new(BIO_f_buffer());

	if (!r || !w || !buf || BIO_set_write_buffer_size(buf, SOCK_BUF) != 1) {
		BIO_free(r);
		BIO_free(w);
		BIO_free(buf);
		return -ENOMEM;
	}
	SSL_set_bio(ssl, r, BIO_push(buf, w));
	return 0;
}

int cmx_tls_accept(struct cmx_server *srv, int fd, const struct cmx_listener *l)
{
	struct link *k = calloc(1, sizeof(*k));
	int fl = fcntl(fd, F_GETFL), e;

	if (k)
		k->srv = srv;
	if (!k || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    !(k->ssl = SSL_new(l->tls->ssl)) || set_bios(k->ssl, fd)) {
		if (k)
			SSL_free(k->ssl);
		free(k);
		close(fd);
		ERR_clear_error();
		return -ENOMEM;
	}
	k->fd = fd;
	k->refs = 1;
	k->rd_io.cb = rd_done;
	k->wr_io.cb = wr_done;
	e = cmx_conn_accept_moved(srv, fd, l, &link_mover, k, &k->conn);
	if (e) {
		k->conn = NULL;
		k->refs = 1;
		link_put(k);
		return e == -EAGAIN ? 0 : e; /* a refusal is logged */
	}
	/* The client speaks first (ClientHello). */
	arm(k, 0, 0);
	return 0;
}
