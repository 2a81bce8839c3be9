// SPDX-License-Identifier: MIT
// Include directories a guest ships for its builds (IncludeFiles): written
// under a private temporary directory per session and program, named in
// the build options in place of the guest's, removed after the build.
#ifndef CMX_HOST_INCDIR_H
#define CMX_HOST_INCDIR_H

#include <stddef.h>
#include <stdint.h>

#include "proto.gen.h"

/* Limits on what one guest directory may bring. */
#define CMX_INCDIR_MAX_DIRS 64u
#define CMX_INCDIR_MAX_FILES 4096u
#define CMX_INCDIR_MAX_NAME 1024u

/* Writes the files (IncludeFiles' payload, decoded) as directory `dir` of
 * (session, program). 0, or a cl_int error: a path that is absolute,
 * climbs (..), or is malformed writes nothing more. */
int cmx_incdir_write(uint64_t session, uint64_t program, uint64_t dir,
		     const struct cmx_IncludeFile_array *files);
/* The options with every "-I cmx-include:N" that names a directory written
 * for (session, program) turned into its host path; malloc'd, NULL when out
 * of memory. */
char *cmx_incdir_options(uint64_t session, uint64_t program, const char *options);
/* Removes what was written for a program, or for a whole session. */
void cmx_incdir_drop(uint64_t session, uint64_t program);
void cmx_incdir_drop_session(uint64_t session);

#endif
