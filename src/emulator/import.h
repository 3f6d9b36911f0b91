/*
 * import.h - one row of an activity import, shared by import.c (which
 * drives rows at the configured rate) and the unit tests: checking a
 * submitted row, storing it in the project, and the row form in which
 * import results show rows.
 */
#ifndef TIDEGATE_EMU_IMPORT_H
#define TIDEGATE_EMU_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "emu.h"

#define EMU_ROWFORM_NFIELDS 26

enum emu_row_outcome { EMU_ROW_CREATED, EMU_ROW_UPDATED, EMU_ROW_FAILED };

/** Field names of the row form, in the spec's order. */
extern const char *const emu_rowform_fields[EMU_ROWFORM_NFIELDS];

/**
 * Check row (borrowed; number is its 1-based position, for messages) and
 * store it in p, created or updated at now. EMU_ROW_FAILED leaves p as it
 * was and sets *message ("Row N: ...", malloc'd, caller frees); otherwise
 * *message is NULL.
 */
enum emu_row_outcome emu_import_row(struct emu_project *p, yajl_val row, size_t number,
    int64_t now, char **message);

/**
 * Row form of a submitted row (borrowed; any JSON value): the
 * EMU_ROWFORM_NFIELDS values as NUL-terminated strings back to back in one
 * malloc'd buffer (caller frees), in emu_rowform_fields order.
 */
char *emu_rowform(yajl_val row);
/** Value i of a packed row form (borrowed from form). */
const char *emu_rowform_field(const char *form, size_t i);

#endif
