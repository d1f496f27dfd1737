// The fused block after a convolution on the CPU: BatchNorm as a per-channel affine, IF/LIF/PLIF
// over all T steps and the optional 2×2 stride-2 spike max-pool, as plif/kernels/block_reference.py
// specifies.  The templates; cpu_block_f32.cpp, _f64.cpp and _bf16.cpp instantiate them, one input
// type each (compiled in parallel, like the neuron kernel's).
//
// The work is cut into tiles: a few rows of one (b, c) plane of y [T, B, C, H, W] (row pairs with
// the pool), so the affine's scale, shift and k are one value per tile.  One thread walks a tile
// through all T steps keeping its potentials in a local array: forward reads y once and writes only
// the (pooled) spikes and the pool's one-byte place; backward recomputes the tile's H for all T into
// a per-thread buffer (T × a tile, L2-sized), then runs the BPTT recursion backwards, writing ∂z once
// and per-tile partial sums.  Per-channel sums (∂β, ∂γ/invstd, ∂k) are per-neuron fp32/fp64
// accumulators over T, summed per tile in double and then per channel in tile order: the same bits
// for any number of threads.
//
// Exactness: -ffp-contract=off (cpu_build.py) keeps z = y·scale + shift rounded after the product
// and after the sum, and H as the reference's charge, so spikes, places and V_{T-1} are bit-identical
// to block_reference.py in fp32 and fp64.  The helpers (load/store of bf16, the surrogates, reset,
// the flag dispatch) are cpu_neuron.h's.
#pragma once

#include <algorithm>
#include <vector>

#include "cpu_neuron.h"

namespace {

// Neurons per tile: enough for the vector loops, and T × this many H values (the backward's
// buffer) stays in L2 for the T of the paper's networks.
inline int64_t tile_rows(int64_t H, int64_t W, int64_t T, bool pool) {
    const int64_t target = std::clamp<int64_t>(32768 / std::max<int64_t>(T, 1), 64, 1024);
    int64_t rows = std::max<int64_t>(1, target / std::max<int64_t>(W, 1));
    if (pool) rows = std::max<int64_t>(2, rows & ~int64_t(1));
    return std::min(rows, H);
}

struct Geometry {
    int64_t T, B, C, H, W, y_step, rows, tiles_per_plane, planes, tiles, Ho, Wo;
    bool pool;

    Geometry(int64_t T_, int64_t B_, int64_t C_, int64_t H_, int64_t W_, int64_t y_step_, bool pool_)
        : T(T_), B(B_), C(C_), H(H_), W(W_), y_step(y_step_), pool(pool_) {
        rows = tile_rows(H, W, T, pool);
        tiles_per_plane = (H + rows - 1) / rows;
        planes = B * C;
        tiles = planes * tiles_per_plane;
        Ho = pool ? H / 2 : H;
        Wo = pool ? W / 2 : W;
    }
    int64_t n() const { return planes * H * W; }           // neurons per step
    int64_t n_out() const { return planes * Ho * Wo; }     // outputs per step
    int64_t channel(int64_t tile) const { return (tile / tiles_per_plane) % C; }
    int64_t plane(int64_t tile) const { return tile / tiles_per_plane; }
    int64_t row0(int64_t tile) const { return (tile % tiles_per_plane) * rows; }
    int64_t row1(int64_t tile) const { return std::min(row0(tile) + rows, H); }
};

template <typename S>
struct TileParams {
    S scale, shift, k, v_th, v_reset;
};

// One step of the neuron over a tile: z = y·scale + shift, charge, fire, reset; spikes into s[].
template <typename X, typename S, bool LEAK, bool HARD>
inline void step_tile(const X* yt, S* v, uint8_t* s, int64_t len, const TileParams<S>& p, S* h_out) {
    const S sc = p.scale, sh = p.shift, kk = p.k, v_th = p.v_th, v_reset = p.v_reset;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
        const S z = load(yt + j) * sc + sh;                                    // BatchNorm
        const S h = LEAK ? v[j] + kk * (z - (v[j] - v_reset)) : v[j] + z;       // charge
        const bool spike = (h - v_th) >= S(0);                                  // fire
        v[j] = reset<HARD>(h, spike, v_th, v_reset);                           // reset
        s[j] = spike;
        if (h_out) h_out[j] = h;
    }
}

// The first spike of a 2×2 window from its code (bit 0 top left, 1 top right, 2 bottom left, 3 bottom
// right): its place row by row, 0 when there is none (max_pool2d's choice), and bit 2 set when any.
inline uint8_t window_result(uint8_t code) {
    // the place for each of the 16 codes, two bits each (code 2 -> 1, 4 -> 2, 6 -> 1, 8 -> 3, ...): a
    // variable shift instead of a branch, so the loop over windows vectorizes
    const uint32_t first = (0x12131210u >> (2u * code)) & 3u;
    return uint8_t(first | (uint32_t(code != 0) << 2));
}

// The 2×2 windows of rows [r0, r1) of one plane: the maximum (an OR on spikes) and the place of the
// first spike in the window row by row.  For an even W every window's code is made in two long
// loops over the tile, branch-free (the rows are short after a few poolings, and spikes make
// branches unpredictable); `work` holds 3/2 of the tile's bytes.  An odd W goes window by window.
template <typename X>
inline void pool_tile(const uint8_t* s, int64_t r0, int64_t r1, int64_t W, int64_t Ho, int64_t Wo, X* out,
                      uint8_t* place, uint8_t* work) {
    const int64_t h_end = std::min(r1, 2 * Ho);  // r0 is even: whole row pairs up to here
    if (h_end <= r0) return;
    if (W % 2 == 0) {
        const int64_t m = (h_end - r0 - 1) * W;  // every element above another inside the pooled rows
        uint8_t* vert = work;
        uint8_t* res = work + m;
        for (int64_t q = 0; q < m; ++q) vert[q] = uint8_t(s[q] | (s[q + W] << 2));
        for (int64_t i = 0; i < m / 2; ++i) res[i] = window_result(uint8_t(vert[2 * i] | (vert[2 * i + 1] << 1)));
        for (int64_t r = r0; r < h_end; r += 2) {  // row pair (r, r+1): its windows are res[(r - r0) / 2 · W ..]
            const uint8_t* c = res + (r - r0) / 2 * W;
            X* o = out + (r / 2) * Wo;
            for (int64_t j = 0; j < Wo; ++j) store(o + j, float((c[j] >> 2) & 1));
            if (place) {
                uint8_t* pl = place + (r / 2) * Wo;
                for (int64_t j = 0; j < Wo; ++j) pl[j] = c[j] & 3;
            }
        }
        return;
    }
    for (int64_t r = r0; r < h_end; r += 2) {
        const uint8_t* a = s + (r - r0) * W;
        const uint8_t* b = a + W;
        X* o = out + (r / 2) * Wo;
        for (int64_t j = 0; j < Wo; ++j) {
            const uint8_t c = window_result(uint8_t(a[2 * j] | (a[2 * j + 1] << 1) | (b[2 * j] << 2) | (b[2 * j + 1] << 3)));
            store(o + j, float((c >> 2) & 1));
            if (place) place[(r / 2) * Wo + j] = c & 3;
        }
    }
}

// forward: (pooled) spikes, the pool's places (may be null), V_{T-1} (may be null).
// y_step: elements between y's time-steps (n, or 0 for a static y read again at every step).
template <typename X, typename S, bool LEAK, bool HARD>
void block_forward_impl(const X* y, const S* scale, const S* shift, const S* k, const S* v0, X* out,
                        uint8_t* place, S* v_last, const Geometry& g, bool k_full, S v_th, S v_reset, int threads) {
    const int64_t n = g.n(), n_out = g.n_out(), plane_size = g.H * g.W, out_plane = g.Ho * g.Wo;
    const S rest = HARD ? v_reset : S(0);
#pragma omp parallel num_threads(threads)
    {
        std::vector<S> v(g.rows * g.W);
        std::vector<uint8_t> s(g.rows * g.W), work(2 * g.rows * g.W);
#pragma omp for schedule(static)
        for (int64_t tile = 0; tile < g.tiles; ++tile) {
            const int64_t c = g.channel(tile), p = g.plane(tile), r0 = g.row0(tile), r1 = g.row1(tile);
            const int64_t base = p * plane_size + r0 * g.W, len = (r1 - r0) * g.W;
            const TileParams<S> tp{scale[c], shift[c], LEAK ? (k_full ? k[c] : k[0]) : S(1), v_th, v_reset};
            if (v0) std::copy(v0 + base, v0 + base + len, v.begin());
            else std::fill(v.begin(), v.begin() + len, rest);
            for (int64_t t = 0; t < g.T; ++t) {
                step_tile<X, S, LEAK, HARD>(y + t * g.y_step + base, v.data(), s.data(), len, tp, nullptr);
                if (g.pool) {
                    pool_tile(s.data(), r0, r1, g.W, g.Ho, g.Wo, out + t * n_out + p * out_plane,
                              place ? place + t * n_out + p * out_plane : nullptr, work.data());
                } else {
                    X* ot = out + t * n + base;
                    for (int64_t j = 0; j < len; ++j) store(ot + j, s[j] ? S(1) : S(0));
                }
            }
            if (v_last) std::copy(v.begin(), v.begin() + len, v_last + base);
        }
    }
}

// ∂L/∂S of the tile's neurons at one step: the pooled gradient routed to each window's chosen
// element (zero elsewhere and outside the pooled rows and columns), or g_out itself without the pool.
template <typename X, typename S>
inline void spike_grad_tile(const X* g_out_t, const uint8_t* place_t, int64_t base, int64_t p, int64_t r0,
                            int64_t r1, const Geometry& g, S* gs) {
    const int64_t len = (r1 - r0) * g.W;
    if (!g.pool) {
        for (int64_t j = 0; j < len; ++j) gs[j] = load(g_out_t + base + j);
        return;
    }
    const int64_t h_end = std::min(r1, 2 * g.Ho), out_plane = g.Ho * g.Wo, wo = g.Wo;
    // long rows: each window's four elements written, the gradient at its place and zero at the others,
    // in stores that vectorize (a row a loop: GCC vectorizes one row's interleaved pair of stores, not
    // two rows'), 1.15-1.2x the whole backward at W = 64 and 128; short rows (W = 28 and 14, the cpu
    // preset's): zeros, then a scatter to each place alone, as vector loops of 7-14 were 1.2x slower
    if (wo < 16) {
        std::fill(gs, gs + len, S(0));
        for (int64_t r = r0; r < h_end; r += 2) {
            const X* go = g_out_t + p * out_plane + (r / 2) * wo;
            const uint8_t* pl = place_t + p * out_plane + (r / 2) * wo;
            S* a = gs + (r - r0) * g.W;
            for (int64_t j = 0; j < wo; ++j) {  // one element per window: no two outputs write the same place
                const int q = pl[j];
                a[(q >> 1) * g.W + 2 * j + (q & 1)] = load(go + j);
            }
        }
        return;
    }
    if (h_end < r1 || g.W != 2 * wo) std::fill(gs, gs + len, S(0));  // an odd H's last row, an odd W's last column
    for (int64_t r = r0; r < h_end; r += 2) {
        const X* go = g_out_t + p * out_plane + (r / 2) * wo;
        const uint8_t* pl = place_t + p * out_plane + (r / 2) * wo;
        S* top = gs + (r - r0) * g.W;
        S* bottom = top + g.W;
        for (int64_t j = 0; j < wo; ++j) {
            const int32_t q = pl[j];
            const S v = load(go + j);
            top[2 * j] = q == 0 ? v : S(0);
            top[2 * j + 1] = q == 1 ? v : S(0);
        }
        for (int64_t j = 0; j < wo; ++j) {
            const int32_t q = pl[j];
            const S v = load(go + j);
            bottom[2 * j] = q == 2 ? v : S(0);
            bottom[2 * j + 1] = q == 3 ? v : S(0);
        }
    }
}

// Σ a[0..len) in double: eight lanes, then the lanes in order (a fixed order that vectorizes; one
// running double sum was a dependent add per element).
template <typename S>
inline double lane_sum(const S* a, int64_t len) {
    double lanes[8] = {0};
    const int64_t whole = len - len % 8;
    for (int64_t j = 0; j < whole; j += 8)
        for (int l = 0; l < 8; ++l) lanes[l] += double(a[j + l]);
    for (int64_t j = whole; j < len; ++j) lanes[j - whole] += double(a[j]);
    double total = 0;
    for (int l = 0; l < 8; ++l) total += lanes[l];
    return total;
}

// BatchNorm's input gradient per channel, ∂y = ((∂z − a) − (y − mean)·b)·scale with a = Σ∂z/n and
// b = invstd²·Σ∂z(y−mean)/n (training) or ∂y = ∂z·scale (evaluation), rounded as
// block_reference.bn_input_grad rounds it.
template <typename S>
struct InputGrad {
    const S *a, *b, *mean, *scale;
    bool training;
};

// ∂y of `len` elements of channel c from their ∂z and y; out may be y itself (each read before it is written).
template <typename X, typename S>
inline void input_grad_run(const S* gz, const X* y, X* out, int64_t len, const InputGrad<S>& dy, int64_t c) {
    const S a = dy.a[c], b = dy.b[c], mu = dy.mean[c], sc = dy.scale[c];
    if (dy.training) {
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) store(out + j, ((gz[j] - a) - (load(y + j) - mu) * b) * sc);
    } else {
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) store(out + j, gz[j] * sc);
    }
}

// backward: ∂V_{-1} [n], per tile the partial sums of ∂z, ∂z·(y - mean) and ∂k (double, [tiles]
// each; the caller sums them per channel), and one of: ∂z [T, n] (state type) into g_z (with
// sum_time: Σ_t ∂z [n], what a y repeated over time needs), ∂y written over y (y_out, with the
// per-channel factors of `dy`), or nothing (the sums only).
template <typename X, typename S, bool LEAK, bool HARD, bool DETACH, int SG, bool NEED_K>
void block_backward_impl(const X* y, const S* scale, const S* shift, const S* mean, const S* k, const S* v0,
                         const uint8_t* place, const X* g_out, const S* g_v_last, S* g_z, bool sum_time, X* y_out,
                         const InputGrad<S>& dy, S* g_v0, double* part_g, double* part_gc, double* part_k,
                         const Geometry& g, bool k_full, S v_th, S v_reset, S sg_a, S sg_b, int threads) {
    const int64_t n = g.n(), n_out = g.n_out(), plane_size = g.H * g.W;
    const S rest = HARD ? v_reset : S(0);
#pragma omp parallel num_threads(threads)
    {
        const int64_t cap = g.rows * g.W;
        std::vector<S> v(cap), h_buf(g.T * cap), gv(cap), gs(cap), gzb(cap), acc_g(cap), acc_gc(cap), acc_k(cap),
            start(cap);
        std::vector<uint8_t> s(cap);
#pragma omp for schedule(static)
        for (int64_t tile = 0; tile < g.tiles; ++tile) {
            const int64_t c = g.channel(tile), p = g.plane(tile), r0 = g.row0(tile), r1 = g.row1(tile);
            const int64_t base = p * plane_size + r0 * g.W, len = (r1 - r0) * g.W;
            const S kk = LEAK ? (k_full ? k[c] : k[0]) : S(1), sc = scale[c], sh = shift[c], mu = mean[c];
            const TileParams<S> tp{sc, sh, kk, v_th, v_reset};
            // separate plain loops: they vectorize (one loop with the choices did not, 15% of the sweep at T = 4)
            if (v0) std::copy(v0 + base, v0 + base + len, start.begin());
            else std::fill(start.begin(), start.begin() + len, rest);
            std::copy(start.begin(), start.begin() + len, v.begin());
            if (g_v_last) std::copy(g_v_last + base, g_v_last + base + len, gv.begin());
            else std::fill(gv.begin(), gv.begin() + len, S(0));
            std::fill(acc_g.begin(), acc_g.begin() + len, S(0));
            std::fill(acc_gc.begin(), acc_gc.begin() + len, S(0));
            std::fill(acc_k.begin(), acc_k.begin() + len, S(0));
            for (int64_t t = 0; t < g.T; ++t)  // the forward again, keeping H
                step_tile<X, S, LEAK, HARD>(y + t * g.y_step + base, v.data(), s.data(), len, tp, h_buf.data() + t * cap);
            for (int64_t t = g.T - 1; t >= 0; --t) {
                spike_grad_tile<X, S>(g_out + t * (g.pool ? n_out : n), g.pool ? place + t * n_out : nullptr, base, p,
                                      r0, r1, g, gs.data());
                const S* ht = h_buf.data() + t * cap;
                const bool first = t == 0;
                const S* prev = first ? start.data() : h_buf.data() + (t - 1) * cap;
                const X* yt = y + t * g.y_step + base;
#pragma omp simd
                for (int64_t j = 0; j < len; ++j) {
                    const S h = ht[j], u = h - v_th;
                    const bool spike = u >= S(0);
                    const S sg = surrogate_grad<SG>(u, sg_a, sg_b);
                    const S g_h = gs[j] * sg + gv[j] * reset_grad<HARD, DETACH>(h, spike, sg, v_th, v_reset);
                    const S yj = load(yt + j);
                    const S gz = LEAK ? g_h * kk : g_h;
                    gzb[j] = gz;
                    acc_g[j] += gz;
                    acc_gc[j] += gz * (yj - mu);
                    if constexpr (LEAK) {
                        if constexpr (NEED_K) {
                            const S pv = prev[j];
                            const S v_prev = first ? pv : reset<HARD>(pv, (pv - v_th) >= S(0), v_th, v_reset);
                            const S z = yj * sc + sh;
                            acc_k[j] += g_h * (z - (v_prev - v_reset));
                        }
                        gv[j] = g_h * (S(1) - kk);
                    } else {
                        gv[j] = g_h;
                    }
                }
                if (g_z && !sum_time) {
                    std::copy(gzb.begin(), gzb.begin() + len, g_z + t * n + base);
                } else if (y_out) {  // y at (t, j) was read above, before it is written here
                    X* yo = y_out + t * g.y_step + base;
                    input_grad_run(gzb.data(), yo, yo, len, dy, c);
                }
            }
            if (g_z && sum_time) std::copy(acc_g.begin(), acc_g.begin() + len, g_z + base);  // acc_g is Σ_t ∂z
            std::copy(gv.begin(), gv.begin() + len, g_v0 + base);
            part_g[tile] = lane_sum(acc_g.data(), len);
            part_gc[tile] = lane_sum(acc_gc.data(), len);
            part_k[tile] = NEED_K ? lane_sum(acc_k.data(), len) : 0.0;
        }
    }
}

// Per-tile partials -> per channel (in tile order: b, then the plane's row tiles), or one total.
inline void sum_per_channel(const double* part, const Geometry& g, double* out) {
    for (int64_t c = 0; c < g.C; ++c) {
        double acc = 0;
        for (int64_t b = 0; b < g.B; ++b)
            for (int64_t r = 0; r < g.tiles_per_plane; ++r) acc += part[(b * g.C + c) * g.tiles_per_plane + r];
        out[c] = acc;
    }
}

// The per-channel factors of InputGrad: a = Σ∂z/n, b = invstd²·Σ∂z(y−mean)/n in the state type.
template <typename S>
void input_grad_factors(const S* invstd, const S* sum_g, const S* sum_gc, int64_t C, double count, S* a, S* b) {
    const S n = S(count);
    for (int64_t c = 0; c < C; ++c) {
        a[c] = sum_g[c] / n;
        b[c] = invstd[c] * invstd[c] * sum_gc[c] / n;
    }
}

// ∂L/∂y over planes of y [T·B·C planes of plane_size] as InputGrad says.  g_y may be g_z itself
// (X == S): each element is read before it is written.
template <typename X, typename S>
void bn_input_grad_impl(const S* g_z, const X* y, const InputGrad<S>& dy, X* g_y, int64_t planes, int64_t C,
                        int64_t plane_size, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t p = 0; p < planes; ++p) {
        const int64_t c = p % C;
        input_grad_run(g_z + p * plane_size, y + p * plane_size, g_y + p * plane_size, plane_size, dy, c);
    }
}

// BatchNorm's batch statistics of y [T, B, C, H, W] (y_step 0: a static y repeated T times): per
// channel, the mean and the biased variance in double.  One pass, shifted by each channel's first
// value; per plane in eight double lanes, then the T·B planes of a channel in order (a static y's
// B planes counted T times), so the bits depend neither on the number of threads nor on whether
// the repeated y was materialised.
typedef double Lanes __attribute__((vector_size(32)));  // four doubles (GCC's and Clang's vector extension)

template <typename X>
void batch_stats_impl(const X* y, double* mean, double* var, int64_t T, int64_t B, int64_t C, int64_t plane_size,
                      int64_t y_step, int threads) {
    const int64_t stored = (y_step == 0 ? 1 : T) * B;  // planes of a channel held in memory
    std::vector<double> s1(stored * C), s2(stored * C);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t p = 0; p < stored * C; ++p) {
        const double shift = double(load(y + (p % C) * plane_size));
        const X* yp = y + p * plane_size;
        // lanes 0-3 and 4-7 as two vectors (GCC left the eight-lane loop scalar): each lane adds the
        // same values in the same order, so the same bits, in half the time (26 -> 13.5 ms a pass over
        // DVS128 Gesture's [20, 1, 128, 128, 128] fp32 on the 2-core AMD EPYC, one thread)
        const Lanes sh = {shift, shift, shift, shift};
        Lanes a1lo = {0, 0, 0, 0}, a1hi = a1lo, a2lo = a1lo, a2hi = a1lo;
        const int64_t whole = plane_size - plane_size % 8;
        for (int64_t j = 0; j < whole; j += 8) {
            const X* q = yp + j;
            const Lanes lo = Lanes{double(load(q)), double(load(q + 1)), double(load(q + 2)), double(load(q + 3))} - sh;
            const Lanes hi = Lanes{double(load(q + 4)), double(load(q + 5)), double(load(q + 6)), double(load(q + 7))} - sh;
            a1lo += lo;
            a1hi += hi;
            a2lo += lo * lo;
            a2hi += hi * hi;
        }
        double a1[8], a2[8];
        for (int l = 0; l < 4; ++l) {
            a1[l] = a1lo[l];
            a1[l + 4] = a1hi[l];
            a2[l] = a2lo[l];
            a2[l + 4] = a2hi[l];
        }
        for (int64_t j = whole; j < plane_size; ++j) {
            const double d = double(load(yp + j)) - shift;
            a1[j - whole] += d;
            a2[j - whole] += d * d;
        }
        double t1 = 0, t2 = 0;
        for (int l = 0; l < 8; ++l) {
            t1 += a1[l];
            t2 += a2[l];
        }
        s1[p] = t1;
        s2[p] = t2;
    }
    const double count = double(T) * double(B) * double(plane_size);
    for (int64_t c = 0; c < C; ++c) {
        double t1 = 0, t2 = 0;
        for (int64_t n = 0; n < T * B; ++n) {
            t1 += s1[(n % stored) * C + c];
            t2 += s2[(n % stored) * C + c];
        }
        const double m = t1 / count, v = t2 / count - m * m;
        mean[c] = double(load(y + c * plane_size)) + m;
        var[c] = v > 0 ? v : 0;
    }
}

}  // namespace

namespace {

// The flag dispatch of the exported functions (cpu_block_*.cpp): each only picks the instantiation.
template <typename X, typename S>
void block_forward(const X* y, const S* scale, const S* shift, const S* k, const S* v0, X* out, uint8_t* place,
                   S* v_last, int64_t T, int64_t B, int64_t C, int64_t H, int64_t W, int64_t y_step, int leak, int hard,
                   int k_full, int pool, double v_th, double v_reset, int threads) {
    const Geometry g(T, B, C, H, W, y_step, pool != 0);
    advise_huge_pages(out, T * g.n_out() * int64_t(sizeof(X)));
    with_bool(leak, [&](auto L) { with_bool(hard, [&](auto HD) {
        block_forward_impl<X, S, decltype(L)::value, decltype(HD)::value>(
            y, scale, shift, k, v0, out, place, v_last, g, k_full != 0, S(v_th), S(v_reset), threads);
    }); });
}

// The backward's flag dispatch and per-channel sums; g_z / y_out / dy as block_backward_impl takes them.
template <typename X, typename S>
void backward_pass(const X* y, const S* scale, const S* shift, const S* mean, const S* k, const S* v0,
                   const uint8_t* place, const X* g_out, const S* g_v_last, S* g_z, bool sum_time, X* y_out,
                   const InputGrad<S>& dy, S* g_v0, S* g_k, S* sum_g, S* sum_gc, const Geometry& g, int leak, int hard,
                   int detach,
                   int surrogate, int k_full, int need_k, double v_th, double v_reset, double sg_a, double sg_b,
                   int threads) {
    std::vector<double> part(3 * g.tiles);
    double *part_g = part.data(), *part_gc = part_g + g.tiles, *part_k = part_gc + g.tiles;
    with_bool(leak, [&](auto L) { with_bool(hard, [&](auto HD) { with_bool(detach, [&](auto D) {
    with_surrogate(surrogate, [&](auto SG) { with_bool_if<decltype(L)::value>(need_k, [&](auto NK) {
        block_backward_impl<X, S, decltype(L)::value, decltype(HD)::value, decltype(D)::value, decltype(SG)::value,
                            decltype(NK)::value>(
            y, scale, shift, mean, k, v0, place, g_out, g_v_last, g_z, sum_time, y_out, dy, g_v0, part_g, part_gc,
            part_k, g, k_full != 0, S(v_th), S(v_reset), S(sg_a), S(sg_b), threads);
    }); }); }); }); });
    std::vector<double> per_c(g.C);
    sum_per_channel(part_g, g, per_c.data());
    for (int64_t c = 0; c < g.C; ++c) sum_g[c] = S(per_c[c]);
    sum_per_channel(part_gc, g, per_c.data());
    for (int64_t c = 0; c < g.C; ++c) sum_gc[c] = S(per_c[c]);
    if (leak && need_k) {
        sum_per_channel(part_k, g, per_c.data());
        if (k_full) {
            for (int64_t c = 0; c < g.C; ++c) g_k[c] = S(per_c[c]);
        } else {
            double total = 0;
            for (int64_t c = 0; c < g.C; ++c) total += per_c[c];
            g_k[0] = S(total);
        }
    }
}

template <typename X, typename S>
void block_backward(const X* y, const S* scale, const S* shift, const S* mean, const S* k, const S* v0,
                    const uint8_t* place, const X* g_out, const S* g_v_last, S* g_z, S* g_v0, S* g_k, S* sum_g,
                    S* sum_gc, int64_t T, int64_t B, int64_t C, int64_t H, int64_t W, int64_t y_step, int leak,
                    int hard, int detach, int surrogate, int k_full, int need_k, int pool, int sum_time, double v_th,
                    double v_reset, double sg_a, double sg_b, int threads) {
    const Geometry g(T, B, C, H, W, y_step, pool != 0);
    advise_huge_pages(g_z, (sum_time ? 1 : T) * g.n() * int64_t(sizeof(S)));
    backward_pass<X, S>(y, scale, shift, mean, k, v0, place, g_out, g_v_last, g_z, sum_time != 0, nullptr,
                        InputGrad<S>{}, g_v0, g_k, sum_g, sum_gc, g, leak, hard, detach, surrogate, k_full, need_k,
                        v_th, v_reset, sg_a, sg_b, threads);
}

// block_backward and bn_input_grad in two sweeps and no new full-size tensor: the first sweep only
// sums, the second recomputes ∂z tile by tile and writes ∂y over y.
template <typename X, typename S>
void block_backward_into_y(X* y, const S* scale, const S* shift, const S* mean, const S* invstd, const S* k,
                           const S* v0, const uint8_t* place, const X* g_out, const S* g_v_last, S* g_v0, S* g_k,
                           S* sum_g, S* sum_gc, int64_t T, int64_t B, int64_t C, int64_t H, int64_t W, int leak,
                           int hard, int detach, int surrogate, int k_full, int need_k, int pool, int training,
                           double v_th, double v_reset, double sg_a, double sg_b, int threads) {
    const Geometry g(T, B, C, H, W, B * C * H * W, pool != 0);
    backward_pass<X, S>(y, scale, shift, mean, k, v0, place, g_out, g_v_last, nullptr, false, nullptr, InputGrad<S>{},
                        g_v0, g_k, sum_g, sum_gc, g, leak, hard, detach, surrogate, k_full, need_k, v_th, v_reset, sg_a,
                        sg_b, threads);
    std::vector<S> a(C), b(C), s_g(C), s_gc(C), g_k2(k_full ? C : 1);
    input_grad_factors(invstd, sum_g, sum_gc, C, double(T) * double(B) * double(H * W), a.data(), b.data());
    const InputGrad<S> dy{a.data(), b.data(), mean, scale, training != 0};
    backward_pass<X, S>(y, scale, shift, mean, k, v0, place, g_out, g_v_last, nullptr, false, y, dy, g_v0, g_k2.data(),
                        s_g.data(), s_gc.data(), g, leak, hard, detach, surrogate, k_full, 0, v_th, v_reset, sg_a,
                        sg_b, threads);
}

template <typename X, typename S>
void bn_input_grad(const S* g_z, const X* y, const S* mean, const S* invstd, const S* scale, const S* sum_g,
                   const S* sum_gc, X* g_y, int64_t planes, int64_t C, int64_t plane_size, int training, int threads) {
    advise_huge_pages(g_y, planes * plane_size * int64_t(sizeof(X)));
    std::vector<S> a(C), b(C);
    input_grad_factors(invstd, sum_g, sum_gc, C, double(planes / C) * double(plane_size), a.data(), b.data());
    bn_input_grad_impl<X, S>(g_z, y, InputGrad<S>{a.data(), b.data(), mean, scale, training != 0}, g_y, planes, C,
                             plane_size, threads);
}

}  // namespace

// One input type's C entry points (X: y, spikes, ∂out, ∂y; S: scale, shift, k, potentials, ∂z).
#define PLIF_BLOCK_ENTRY_POINTS(SUFFIX, XC, X, S)                                                                   \
    extern "C" {                                                                                                   \
    void plif_block_forward_##SUFFIX(const XC* y, const S* scale, const S* shift, const S* k, const S* v0, XC* out, \
                                     uint8_t* place, S* v_last, int64_t T, int64_t B, int64_t C, int64_t H,         \
                                     int64_t W, int64_t y_step, int leak, int hard, int k_full, int pool,           \
                                     double v_th, double v_reset, int threads) {                                    \
        block_forward<X, S>(reinterpret_cast<const X*>(y), scale, shift, k, v0, reinterpret_cast<X*>(out), place,  \
                            v_last, T, B, C, H, W, y_step, leak, hard, k_full, pool, v_th, v_reset, threads);      \
    }                                                                                                              \
    void plif_block_backward_##SUFFIX(const XC* y, const S* scale, const S* shift, const S* mean, const S* k,      \
                                      const S* v0, const uint8_t* place, const XC* g_out, const S* g_v_last,       \
                                      S* g_z, S* g_v0, S* g_k, S* sum_g, S* sum_gc, int64_t T, int64_t B,          \
                                      int64_t C, int64_t H, int64_t W, int64_t y_step, int leak, int hard,         \
                                      int detach, int surrogate, int k_full, int need_k, int pool, int sum_time,   \
                                      double v_th, double v_reset, double sg_a, double sg_b, int threads) {        \
        block_backward<X, S>(reinterpret_cast<const X*>(y), scale, shift, mean, k, v0, place,                      \
                             reinterpret_cast<const X*>(g_out), g_v_last, g_z, g_v0, g_k, sum_g, sum_gc, T, B, C,  \
                             H, W, y_step, leak, hard, detach, surrogate, k_full, need_k, pool, sum_time, v_th,    \
                             v_reset, sg_a, sg_b, threads);                                                        \
    }                                                                                                              \
    void plif_block_backward_into_y_##SUFFIX(XC* y, const S* scale, const S* shift, const S* mean,               \
                                             const S* invstd, const S* k, const S* v0, const uint8_t* place,     \
                                             const XC* g_out, const S* g_v_last, S* g_v0, S* g_k, S* sum_g,      \
                                             S* sum_gc, int64_t T, int64_t B, int64_t C, int64_t H, int64_t W,   \
                                             int leak, int hard, int detach, int surrogate, int k_full,          \
                                             int need_k, int pool, int training, double v_th, double v_reset,    \
                                             double sg_a, double sg_b, int threads) {                            \
        block_backward_into_y<X, S>(reinterpret_cast<X*>(y), scale, shift, mean, invstd, k, v0, place,           \
                                    reinterpret_cast<const X*>(g_out), g_v_last, g_v0, g_k, sum_g, sum_gc, T, B, \
                                    C, H, W, leak, hard, detach, surrogate, k_full, need_k, pool, training,      \
                                    v_th, v_reset, sg_a, sg_b, threads);                                         \
    }                                                                                                              \
    void plif_bn_input_grad_##SUFFIX(const S* g_z, const XC* y, const S* mean, const S* invstd, const S* scale,    \
                                     const S* sum_g, const S* sum_gc, XC* g_y, int64_t planes, int64_t C,          \
                                     int64_t plane_size, int training, int threads) {                              \
        bn_input_grad<X, S>(g_z, reinterpret_cast<const X*>(y), mean, invstd, scale, sum_g, sum_gc,                \
                            reinterpret_cast<X*>(g_y), planes, C, plane_size, training, threads);                  \
    }                                                                                                              \
    void plif_batch_stats_##SUFFIX(const XC* y, double* mean, double* var, int64_t T, int64_t B, int64_t C,        \
                                   int64_t plane_size, int64_t y_step, int threads) {                              \
        batch_stats_impl<X>(reinterpret_cast<const X*>(y), mean, var, T, B, C, plane_size, y_step, threads);       \
    }                                                                                                              \
    }
