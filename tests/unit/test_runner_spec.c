// Prompt-lookup drafting (src/runner/spec.c): the most recent earlier
// occurrence of the longest matching suffix, what followed it, capped.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runner/internal.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_lookup_longest_recent(void **state)
{
    (void)state;
    int32_t out[8];
    // ... 1 2 3 [4 5] ... 1 2 3 [7 8] ... 2 3: "2 3" last matched before the
    // end at positions 6-7, followed by 7 8 9 2 3.
    const int32_t h[] = {1, 2, 3, 4, 5, 1, 2, 3, 7, 8, 9, 2, 3};
    int k = runner_spec_lookup(h, N(h), 2, out, 8);
    assert_int_equal(k, 5);
    const int32_t want[] = {7, 8, 9, 2, 3};
    assert_memory_equal(out, want, sizeof(want));
    // Capped at max.
    assert_int_equal(runner_spec_lookup(h, N(h), 2, out, 2), 2);
    assert_int_equal(out[0], 7);
    assert_int_equal(out[1], 8);
    // "9 2 3" (n-gram 3) never occurred before: falls back to "2 3".
    assert_int_equal(runner_spec_lookup(h, N(h), 3, out, 8), 5);
    assert_int_equal(out[0], 7);
}

static void test_lookup_longer_match_wins(void **state)
{
    (void)state;
    int32_t out[4];
    // Suffix 5 6: "6" alone last occurred at 7 (followed by 1), but "5 6"
    // only at 1-2 (followed by 9): the longer n-gram is tried first.
    const int32_t h[] = {4, 5, 6, 9, 0, 0, 0, 6, 1, 5, 6};
    assert_int_equal(runner_spec_lookup(h, N(h), 2, out, 1), 1);
    assert_int_equal(out[0], 9);
    assert_int_equal(runner_spec_lookup(h, N(h), 1, out, 1), 1);
    assert_int_equal(out[0], 1);
}

static void test_lookup_nothing(void **state)
{
    (void)state;
    int32_t out[4];
    const int32_t h[] = {1, 2, 3, 4};
    assert_int_equal(runner_spec_lookup(h, N(h), 3, out, 4), 0);  // 4 never seen before
    assert_int_equal(runner_spec_lookup(h, 1, 3, out, 4), 0);     // one token: nothing earlier
    assert_int_equal(runner_spec_lookup(h, N(h), 3, out, 0), 0);  // no room
    const int32_t r[] = {7, 7, 7};
    // "7 7" at 0-1 is followed by the last 7 itself.
    assert_int_equal(runner_spec_lookup(r, N(r), 2, out, 4), 1);
    assert_int_equal(out[0], 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_longest_recent),
        cmocka_unit_test(test_lookup_longer_match_wins),
        cmocka_unit_test(test_lookup_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
