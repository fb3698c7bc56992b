/* lpf_put and lpf_get with every legal offset and size in an area of N bytes (size 0 to N,
 * source and destination offsets 0 to N - size, so zero-size transfers at every offset up to
 * the end), to the process itself, to the next and from the previous one, from and into
 * local and global slots; many processes reading one source in the same superstep; offsets
 * past 1 MiB in a larger area. In a section and in LPF_ROOT. Every
 * destination byte is checked: transferred bytes against the source's formula, the others
 * unchanged. */
#include <lpf/core.h>
#include <string.h>
#include "check.h"

#define N 8
/* Combinations (size, source offset, destination offset): sum over s of (N + 1 - s)^2. */
#define C ((N + 1) * (N + 2) * (2 * N + 3) / 6)
#define UNTOUCHED 0xEE
#define BIG ((1u << 20) + 13)

static unsigned char src_byte(lpf_pid_t pid, size_t i) { return (unsigned char)(pid * 17 + i * 5 + 3); }

struct combo { size_t size, src_off, dst_off; };
static struct combo combos[C];

static void make_combos(void) {
    int c = 0;
    for (size_t s = 0; s <= N; s++)
        for (size_t so = 0; so + s <= N; so++)
            for (size_t d = 0; d + s <= N; d++) combos[c++] = (struct combo){s, so, d};
    CHECK(c == C, "%d combinations, want %d", c, C);
}

/* Region c of `buf` after combination c moved bytes from process `from`. */
static void check_region(const unsigned char *buf, int c, lpf_pid_t from, const char *what,
                         const char *where) {
    struct combo k = combos[c];
    for (size_t i = 0; i < N; i++) {
        unsigned char b = buf[c * N + i];
        int moved = i >= k.dst_off && i < k.dst_off + k.size;
        unsigned char want = moved ? src_byte(from, k.src_off + (i - k.dst_off)) : UNTOUCHED;
        CHECK(b == want, "%s: %s of %zu bytes from byte %zu to byte %zu (process %u): byte %zu "
              "is %#x, want %#x", where, what, k.size, k.src_off, k.dst_off, from, i, b, want);
    }
}

static void sync_ok(lpf_t ctx, const char *where) {
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "%s: sync", where);
}

static void putget(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, const char *where) {
    lpf_pid_t next = (pid + 1) % p, prev = (pid + p - 1) % p;
    /* The source twice (global for gets and puts, local for puts); destinations: puts land
     * in put_dst (global), gets in get_dst (even combinations: a local slot, odd: global). */
    unsigned char src[N], src_copy[N];
    for (size_t i = 0; i < N; i++) src[i] = src_copy[i] = src_byte(pid, i);
    unsigned char *put_dst = malloc(C * N), *get_local = malloc(C * N), *get_global = malloc(C * N);
    unsigned char *from0 = malloc(N);
    unsigned char *big = calloc(BIG, 1);
    CHECK(lpf_resize_memory_register(ctx, 8) == LPF_SUCCESS, "%s: resize", where);
    CHECK(lpf_resize_message_queue(ctx, 2 * C) == LPF_SUCCESS, "%s: resize", where);
    sync_ok(ctx, where);
    lpf_memslot_t s_src, s_copy, s_put, s_gl, s_gg, s_from0, s_big;
    CHECK(lpf_register_global(ctx, src, N, &s_src) == LPF_SUCCESS, "%s: register", where);
    CHECK(lpf_register_local(ctx, src_copy, N, &s_copy) == LPF_SUCCESS, "%s: register", where);
    CHECK(lpf_register_global(ctx, put_dst, C * N, &s_put) == LPF_SUCCESS, "%s: register", where);
    CHECK(lpf_register_local(ctx, get_local, C * N, &s_gl) == LPF_SUCCESS, "%s: register", where);
    CHECK(lpf_register_global(ctx, get_global, C * N, &s_gg) == LPF_SUCCESS, "%s: register", where);
    CHECK(lpf_register_local(ctx, from0, N, &s_from0) == LPF_SUCCESS, "%s: register", where);
    CHECK(lpf_register_global(ctx, big, BIG, &s_big) == LPF_SUCCESS, "%s: register", where);
    sync_ok(ctx, where);

    /* Puts to `to` and gets from `to`; the puts landing here came from `from`. */
    const lpf_pid_t targets[3][2] = {{pid, pid}, {next, prev}, {prev, next}};
    const char *names[3] = {"self", "next", "previous"};
    for (int t = 0; t < 3; t++) {
        lpf_pid_t to = targets[t][0], from = targets[t][1];
        memset(put_dst, UNTOUCHED, C * N);
        memset(get_local, UNTOUCHED, C * N);
        memset(get_global, UNTOUCHED, C * N);
        sync_ok(ctx, where); /* nobody writes into put_dst before it is reset */
        for (int c = 0; c < C; c++) {
            struct combo k = combos[c];
            lpf_memslot_t from_slot = c % 2 ? s_copy : s_src;
            CHECK(lpf_put(ctx, from_slot, k.src_off, to, s_put, c * N + k.dst_off, k.size,
                          LPF_MSG_DEFAULT) == LPF_SUCCESS, "%s: put %d to %s", where, c, names[t]);
            CHECK(lpf_get(ctx, to, s_src, k.src_off, c % 2 ? s_gg : s_gl, c * N + k.dst_off,
                          k.size, LPF_MSG_DEFAULT) == LPF_SUCCESS, "%s: get %d from %s", where,
                  c, names[t]);
        }
        sync_ok(ctx, where);
        for (int c = 0; c < C; c++) {
            check_region(put_dst, c, from, "put", where);
            check_region(c % 2 ? get_global : get_local, c, to, "get", where);
        }
    }

    /* Every process reads process 0's source in the same superstep. */
    memset(from0, UNTOUCHED, N);
    CHECK(lpf_get(ctx, 0, s_src, 0, s_from0, 0, N, LPF_MSG_DEFAULT) == LPF_SUCCESS, "%s: get", where);
    sync_ok(ctx, where);
    for (size_t i = 0; i < N; i++)
        CHECK(from0[i] == src_byte(0, i), "%s: byte %zu of process 0's source", where, i);

    /* Offsets past 1 MiB: the last 13 bytes of the previous process's large area. */
    for (size_t i = 0; i < 13; i++) big[(1u << 20) + i] = src_byte(pid, i);
    sync_ok(ctx, where);
    CHECK(lpf_put(ctx, s_big, 1u << 20, next, s_big, 0, 13, LPF_MSG_DEFAULT) == LPF_SUCCESS,
          "%s: put", where);
    CHECK(lpf_get(ctx, prev, s_big, 1u << 20, s_big, (1u << 20) - 13, 13, LPF_MSG_DEFAULT) ==
          LPF_SUCCESS, "%s: get", where);
    sync_ok(ctx, where);
    for (size_t i = 0; i < 13; i++) {
        CHECK(big[i] == src_byte(prev, i), "%s: large area byte %zu", where, i);
        CHECK(big[(1u << 20) - 13 + i] == src_byte(prev, i), "%s: large area byte %zu", where,
              (1u << 20) - 13 + i);
        CHECK(big[(1u << 20) + i] == src_byte(pid, i), "%s: source changed", where);
    }

    lpf_memslot_t all[] = {s_src, s_copy, s_put, s_gl, s_gg, s_from0, s_big};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        CHECK(lpf_deregister(ctx, all[i]) == LPF_SUCCESS, "%s: deregister", where);
    free(put_dst);
    free(get_local);
    free(get_global);
    free(from0);
    free(big);
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    putget(ctx, pid, p, "section");
}

int main(void) {
    make_combos();
    putget(LPF_ROOT, 0, 1, "LPF_ROOT");
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
