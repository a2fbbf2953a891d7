/* SPDX-License-Identifier: MIT */
/* The parsers of the options that commands share (cmd/options.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "cmd/options.h"

Test(options, time_range)
{
	uint64_t a = 1, b = 2;

	cr_assert_eq(parse_time_range("5,10", &a, &b), 0);
	cr_assert_eq(a, 5000000000ULL);
	cr_assert_eq(b, 10000000000ULL);
	cr_assert_eq(parse_time_range("2.5,", &a, &b), 0);
	cr_assert_eq(a, 2500000000ULL);
	cr_assert_eq(b, UINT64_MAX);
	cr_assert_eq(parse_time_range(",0.001", &a, &b), 0);
	cr_assert_eq(a, 0);
	cr_assert_eq(b, 1000000);
	cr_assert_eq(parse_time_range("7", &a, &b), 0);
	cr_assert_eq(a, 7000000000ULL);
	a = 42;
	for (const char *bad[] = { "", ",", "10,5", "5,5", "-1,2", "x,1", "1,2,3", "1e99,", "nan,",
				   " 1,2" },
			**s = bad;
	     s < bad + sizeof(bad) / sizeof(bad[0]); s++)
		cr_assert_eq(parse_time_range(*s, &a, &b), -EINVAL, "'%s'", *s);
	cr_assert_eq(a, 42, "untouched on failure");
}

Test(options, id_list)
{
	uint32_t *ids = NULL;
	size_t n = 0;

	cr_assert_eq(parse_id_list("1,22,333", &ids, &n), 0);
	cr_assert_eq(parse_id_list("4", &ids, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert(ids[0] == 1 && ids[1] == 22 && ids[2] == 333 && ids[3] == 4);
	for (const char *bad[] = { "", ",", "1,", ",1", "-1", "4294967296", "1 ", "0x10" },
			**s = bad;
	     s < bad + sizeof(bad) / sizeof(bad[0]); s++)
		cr_assert_eq(parse_id_list(*s, &ids, &n), -EINVAL, "'%s'", *s);
	free(ids);
}
