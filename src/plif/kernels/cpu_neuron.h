// Fused multi-step IF/LIF/PLIF for the CPU: the same recursion as plif/neurons/bptt.py.  The
// templates; cpu_neuron_f32.cpp, _f64.cpp and _bf16.cpp instantiate them for one input type each,
// three translation units that compile in parallel (the build was one 24 s g++ call).
//
// Plain C++17 + OpenMP with a C ABI (loaded through ctypes), built without the PyTorch headers.
// Neurons are cut into chunks small enough for L1; each thread keeps a chunk's potential in a
// local array and walks all T steps, so X is read once and S, H written once
// (forward), and H, dL/dS read once and dL/dX written once (backward).  Variants are template
// flags; the exported functions only pick the instantiation.  Build with -ffp-contract=off: a
// fused multiply-add would round H_t differently from the PyTorch reference and flip spikes.
//
// The input type X (x and spikes in forward, dL/dS and dL/dX in backward) is a template parameter
// apart from the state type S (potential, H, k, V): bf16 inputs (CPU autocast) are read as bf16,
// widened to fp32 in registers, and the spikes and dL/dX written back as bf16; H and the state
// stay fp32.  For fp32 and fp64, X == S and load/store are plain reads and writes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

constexpr int64_t kChunk = 512;  // neurons per chunk: a few arrays of this fit in L1

// The outputs are fresh allocations, and on Linux first-touching 4 KiB pages costs as much as the
// kernel itself (a 51 MB tensor: ~24 ms of page faults against ~5 ms to copy it).  Asking for
// transparent huge pages on the 2 MiB-aligned interior cuts that ~5x; it is only a hint, ignored
// where THP is off.
void advise_huge_pages(void* p, int64_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr uintptr_t kHuge = uintptr_t(1) << 21;
    if (bytes < int64_t(2 * kHuge)) return;
    uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + uintptr_t(bytes)) & ~(kHuge - 1);
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
    (void)p; (void)bytes;
#endif
}

// bf16 as torch stores it: the top 16 bits of an fp32.
struct bf16 {
    uint16_t bits;
};

inline float load(const float* p) { return *p; }
inline double load(const double* p) { return *p; }
inline float load(const bf16* p) {
    uint32_t u = uint32_t(p->bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline void store(float* p, float v) { *p = v; }
inline void store(double* p, double v) { *p = v; }
inline void store(bf16* p, float v) {  // round to nearest even, NaN -> 0x7FC0: torch's fp32 -> bf16 cast
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = 0u - uint32_t((u & 0x7FFFFFFFu) > 0x7F800000u);  // all ones for a NaN
    p->bits = uint16_t((rounded & ~nan) | (0x7FC0u & nan));  // a mask, not a branch: the loops stay vectorizable
}

template <typename F>
void with_bool(bool b, F&& f) {
    if (b) f(std::true_type{}); else f(std::false_type{});
}

// A flag that only matters when another one is set (K_FULL and NEED_K without leak: Python passes
// 0 for both then): instantiated only where it can be 1, which keeps the build a third shorter.
template <bool ON, typename F>
void with_bool_if(bool b, F&& f) {
    if constexpr (ON) with_bool(b, f); else f(std::false_type{});
}

template <typename F>
void with_surrogate(int code, F&& f) {
    switch (code) {
        case 0: f(std::integral_constant<int, 0>{}); break;
        case 1: f(std::integral_constant<int, 1>{}); break;
        case 2: f(std::integral_constant<int, 2>{}); break;
        default: f(std::integral_constant<int, 3>{}); break;
    }
}

// σ'(u); a and b are host-folded constants (see cpu_neuron.py, same as the Triton kernel).
template <int SG, typename S>
inline S surrogate_grad(S u, S a, S b) {
    if constexpr (SG == 0) {  // atan: a = α/2, b = π/2·α
        S z = b * u;
        return a / (S(1) + z * z);
    } else if constexpr (SG == 1) {  // sigmoid: a = α
        S s = S(1) / (S(1) + std::exp(-a * u));
        return a * s * (S(1) - s);
    } else if constexpr (SG == 2) {  // rect: a = α/2, b = 1/α
        return std::fabs(u) < b ? a : S(0);
    } else {  // triangle: a = α, b = α²
        S g = a - b * std::fabs(u);
        return g > S(0) ? g : S(0);
    }
}

template <bool HARD, typename S>
inline S reset(S h, bool spike, S v_th, S v_reset) {
    if constexpr (HARD) return spike ? v_reset : h;
    else return spike ? h - v_th : h;
}

// ∂V_t/∂H_t: 1 - S_t for a hard reset (plus (V_reset - H_t)·σ' when the reset is not detached), 1 for a
// soft one (minus V_th·σ').
template <bool HARD, bool DETACH, typename S>
inline S reset_grad(S h, bool spike, S sg, S v_th, S v_reset) {
    S dv_dh;
    if constexpr (HARD) {
        dv_dh = spike ? S(0) : S(1);
        if constexpr (!DETACH) dv_dh += (v_reset - h) * sg;
    } else {
        dv_dh = S(1);
        if constexpr (!DETACH) dv_dh -= v_th * sg;
    }
    return dv_dh;
}

// x_step: elements between x's time-steps, N, or 0 for a static input read again at every step.
// KEEP_H: H is written for backward (not when nothing will be differentiated, e.g. evaluation).
template <typename X, typename S, bool LEAK, bool HARD, bool K_FULL, bool KEEP_H>
void forward_impl(const X* x, const S* k, const S* v0, X* spikes, S* h_seq, S* v_last,
                  int64_t T, int64_t N, int64_t x_step, S v_th, S v_reset, int threads) {
    const int64_t chunks = (N + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t n0 = c * kChunk, len = (N - n0 < kChunk) ? N - n0 : kChunk;
        S v[kChunk], kk[kChunk];
        for (int64_t j = 0; j < len; ++j) {
            v[j] = v0[n0 + j];
            kk[j] = K_FULL ? k[n0 + j] : k[0];
        }
        for (int64_t t = 0; t < T; ++t) {
            const X* xt = x + t * x_step + n0;
            X* st = spikes + t * N + n0;
            S* ht = KEEP_H ? h_seq + t * N + n0 : nullptr;
#pragma omp simd
            for (int64_t j = 0; j < len; ++j) {
                const S xj = load(xt + j);
                S h = LEAK ? v[j] + kk[j] * (xj - (v[j] - v_reset)) : v[j] + xj;  // charge
                bool spike = (h - v_th) >= S(0);                                       // fire
                v[j] = reset<HARD>(h, spike, v_th, v_reset);                          // reset
                store(st + j, spike ? S(1) : S(0));
                if constexpr (KEEP_H) ht[j] = h;
            }
        }
        for (int64_t j = 0; j < len; ++j) v_last[n0 + j] = v[j];
    }
}

template <typename X, typename S, bool LEAK, bool HARD, bool DETACH, int SG, bool K_FULL, bool NEED_K>
void backward_impl(const X* g_s, const S* g_v_last, const S* h_seq, const S* v0, const S* k,
                   X* g_x, S* g_v0, S* g_k_neuron, int64_t T, int64_t N, S v_th, S v_reset,
                   S sg_a, S sg_b, int threads) {
    const int64_t chunks = (N + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t n0 = c * kChunk, len = (N - n0 < kChunk) ? N - n0 : kChunk;
        S g_v[kChunk], g_k[kChunk], kk[kChunk];
        for (int64_t j = 0; j < len; ++j) {
            g_v[j] = g_v_last[n0 + j];
            g_k[j] = S(0);
            kk[j] = K_FULL ? k[n0 + j] : k[0];
        }
        for (int64_t t = T - 1; t >= 0; --t) {
            const S* ht = h_seq + t * N + n0;
            // V_{t-1}: reset(H_{t-1}), or V_{-1} at t = 0; read from one pointer and selected, not
            // branched on, so the loop also vectorizes when it mixes bf16 and fp32
            const bool first = t == 0;
            const S* prev = first ? v0 + n0 : h_seq + (t - 1) * N + n0;
            const X* gst = g_s + t * N + n0;
            X* gxt = g_x + t * N + n0;
#pragma omp simd
            for (int64_t j = 0; j < len; ++j) {
                const S h = ht[j], u = h - v_th;
                const bool spike = u >= S(0);
                const S sg = surrogate_grad<SG>(u, sg_a, sg_b);
                const S g_h = load(gst + j) * sg + g_v[j] * reset_grad<HARD, DETACH>(h, spike, sg, v_th, v_reset);
                if constexpr (LEAK) {
                    store(gxt + j, g_h * kk[j]);
                    if constexpr (NEED_K) {
                        const S p = prev[j];
                        const S v_prev = first ? p : reset<HARD>(p, (p - v_th) >= S(0), v_th, v_reset);
                        g_k[j] += g_h * ((h - v_prev) / kk[j]);
                    }
                    g_v[j] = g_h * (S(1) - kk[j]);
                } else {
                    store(gxt + j, g_h);
                    g_v[j] = g_h;
                }
            }
        }
        for (int64_t j = 0; j < len; ++j) {
            g_v0[n0 + j] = g_v[j];
            if (NEED_K) g_k_neuron[n0 + j] = g_k[j];
        }
    }
}

template <typename X, typename S>
void forward(const X* x, const S* k, const S* v0, X* spikes, S* h_seq, S* v_last, int64_t T, int64_t N,
             int64_t x_step, int leak, int hard, int k_full, double v_th, double v_reset, int threads) {
    advise_huge_pages(spikes, T * N * int64_t(sizeof(X)));
    if (h_seq) advise_huge_pages(h_seq, T * N * int64_t(sizeof(S)));
    with_bool(leak, [&](auto L) { with_bool(hard, [&](auto H) { with_bool_if<decltype(L)::value>(k_full, [&](auto KF) {
    with_bool(h_seq != nullptr, [&](auto KH) {
        forward_impl<X, S, decltype(L)::value, decltype(H)::value, decltype(KF)::value, decltype(KH)::value>(
            x, k, v0, spikes, h_seq, v_last, T, N, x_step, S(v_th), S(v_reset), threads);
    }); }); }); });
}

template <typename X, typename S>
void backward(const X* g_s, const S* g_v_last, const S* h_seq, const S* v0, const S* k, X* g_x, S* g_v0,
              S* g_k_neuron, int64_t T, int64_t N, int leak, int hard, int detach, int surrogate, int k_full,
              int need_k, double v_th, double v_reset, double sg_a, double sg_b, int threads) {
    advise_huge_pages(g_x, T * N * int64_t(sizeof(X)));
    with_bool(leak, [&](auto L) { with_bool(hard, [&](auto H) { with_bool(detach, [&](auto D) {
    with_surrogate(surrogate, [&](auto SG) { with_bool_if<decltype(L)::value>(k_full, [&](auto KF) {
    with_bool_if<decltype(L)::value>(need_k, [&](auto NK) {
        backward_impl<X, S, decltype(L)::value, decltype(H)::value, decltype(D)::value, decltype(SG)::value,
                      decltype(KF)::value, decltype(NK)::value>(
            g_s, g_v_last, h_seq, v0, k, g_x, g_v0, g_k_neuron, T, N, S(v_th), S(v_reset), S(sg_a), S(sg_b),
            threads);
    }); }); }); }); }); });
}

}  // namespace
