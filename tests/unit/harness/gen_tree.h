/*
 * gen_tree.h - for unit tests: what a yajl generator produced, parsed back
 * into a tree, so tests assert on members rather than on bytes.
 */
#ifndef TG_TEST_GEN_TREE_H
#define TG_TEST_GEN_TREE_H

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "tidegate/json.h"

/** The tree of what g generated (NULL if it is not JSON); g is freed. */
static inline yajl_val
gen_tree(yajl_gen g)
{
	const unsigned char *buf;
	size_t len;
	yajl_val v;

	yajl_gen_get_buf(g, &buf, &len);
	v = tg_json_parse((const char *)buf, len, NULL);
	yajl_gen_free(g);
	return v;
}

#endif
