// SPDX-License-Identifier: MIT
// One logging call for the whole project: journald-friendly single lines.
#ifndef CMX_LOG_H
#define CMX_LOG_H

enum cmx_log_level { CMX_LOG_ERR, CMX_LOG_WARN, CMX_LOG_INFO, CMX_LOG_DEBUG };

/* Lines go to stderr as "<prog>: <level>: message"; the level threshold comes
 * from CLMUX_LOG (err, warn, info, debug), default warn in the guest and info
 * in the daemon (set with cmx_log_init()). */
void cmx_log_init(const char *prog, enum cmx_log_level dflt);
int cmx_log_enabled(enum cmx_log_level level);
void cmx_log(enum cmx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define cmx_err(...) cmx_log(CMX_LOG_ERR, __VA_ARGS__)
#define cmx_warn(...) cmx_log(CMX_LOG_WARN, __VA_ARGS__)
#define cmx_info(...) cmx_log(CMX_LOG_INFO, __VA_ARGS__)
#define cmx_dbg(...) do { if (cmx_log_enabled(CMX_LOG_DEBUG)) cmx_log(CMX_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
