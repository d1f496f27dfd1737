// Max-pooling over k×k windows every s (no padding, no dilation) of contiguous [planes, H, W] on
// the CPU, with the same choice as PyTorch's CPU max_pool2d_with_indices: the running maximum
// starts at -inf and an element replaces it when it is larger or NaN, so the first maximal
// element of the window (row by row) is chosen, and the last NaN if there is one.
//
// Instead of an int64 flat index per output, forward keeps one byte: the chosen element's place
// in its window, dy·k + dx (k ≤ 16).  Parallel over planes (OpenMP); built with the cpu_neuron_*.cpp
// into one library.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace {

// Whether the element v replaces the running maximum m (PyTorch's rule: larger, or NaN).
template <typename S>
inline bool takes(S v, S m) { return (v > m) | (v != v); }

// One output row, any k and s.  Branch-free (selects, no jumps): on spikes the comparisons are
// unpredictable.  Starting from the window's first element is the same as starting from -inf
// (-inf or NaN first: same value, same place 0).
template <typename S, int K>
inline void pool_row(const S* row0, int64_t W, int64_t Wo, int64_t s, int k, S* out, uint8_t* off) {
    const int kk = K > 0 ? K : k;
    for (int64_t j = 0; j < Wo; ++j) {
        const S* w = row0 + j * s;
        S m = w[0];
        uint8_t best = 0;
        for (int dy = 0; dy < kk; ++dy) {
            for (int dx = (dy == 0 ? 1 : 0); dx < kk; ++dx) {
                const S v = w[dy * W + dx];
                const bool t = takes(v, m);
                m = t ? v : m;
                best = t ? uint8_t(dy * kk + dx) : best;
            }
        }
        out[j] = m;
        off[j] = best;
    }
}

#if defined(__SSE2__)
// k = s = 2 in fp32, four outputs at a time (SSE2 is in every x86-64 CPU): the rows are short
// (14 outputs on the cpu preset), too short for the auto-vectoriser, which left this ~2.3x slower.
inline __m128 select(__m128 t, __m128 a, __m128 b) { return _mm_or_ps(_mm_and_ps(t, a), _mm_andnot_ps(t, b)); }

inline int64_t pool_row_2x2(const float* r0, const float* r1, int64_t Wo, float* out, uint8_t* off) {
    int64_t j = 0;
    for (; j + 4 <= Wo; j += 4) {
        const __m128 a0 = _mm_loadu_ps(r0 + 2 * j), a1 = _mm_loadu_ps(r0 + 2 * j + 4);
        const __m128 c0 = _mm_loadu_ps(r1 + 2 * j), c1 = _mm_loadu_ps(r1 + 2 * j + 4);
        const __m128 v[3] = {_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)), _mm_shuffle_ps(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1))};
        __m128 m = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 best = _mm_setzero_ps();
        for (int e = 0; e < 3; ++e) {
            const __m128 t = _mm_or_ps(_mm_cmpgt_ps(v[e], m), _mm_cmpunord_ps(v[e], v[e]));
            m = select(t, v[e], m);
            best = select(t, _mm_castsi128_ps(_mm_set1_epi32(e + 1)), best);
        }
        _mm_storeu_ps(out + j, m);
        const __m128i b = _mm_castps_si128(best);
        const int32_t four = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(b, b), _mm_setzero_si128()));
        std::memcpy(off + j, &four, 4);
    }
    return j;  // the caller finishes the row
}
#endif

template <typename S, int K>
void forward_impl(const S* x, S* out, uint8_t* off, int64_t planes, int64_t H, int64_t W, int k, int64_t s,
                  int threads) {
    const int64_t Ho = (H - k) / s + 1, Wo = (W - k) / s + 1;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t p = 0; p < planes; ++p) {
        const S* xp = x + p * H * W;
        for (int64_t i = 0; i < Ho; ++i) {
            const int64_t o = (p * Ho + i) * Wo;
            int64_t done = 0;
#if defined(__SSE2__)
            if constexpr (std::is_same_v<S, float> && K == 2)
                if (s == 2) done = pool_row_2x2(xp + 2 * i * W, xp + (2 * i + 1) * W, Wo, out + o, off + o);
#endif
            pool_row<S, K>(xp + i * s * W + done * s, W, Wo - done, s, k, out + o + done, off + o + done);
        }
    }
}

// Zero ∂x, then add each output's gradient at its chosen place in output order (PyTorch's
// order, so where windows overlap (s < k) the sums round the same).
template <typename S>
void backward(const S* g_out, const uint8_t* off, S* g_x, int64_t planes, int64_t H, int64_t W, int k, int64_t s,
              int threads) {
    const int64_t Ho = (H - k) / s + 1, Wo = (W - k) / s + 1;
    int64_t place[256];  // place in the window dy·k + dx -> dy·W + dx
    for (int dy = 0; dy < k; ++dy)
        for (int dx = 0; dx < k; ++dx) place[dy * k + dx] = dy * W + dx;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t p = 0; p < planes; ++p) {
        S* gp = g_x + p * H * W;
        const S* go = g_out + p * Ho * Wo;
        const uint8_t* of = off + p * Ho * Wo;
        std::memset(gp, 0, sizeof(S) * H * W);
        for (int64_t i = 0; i < Ho; ++i)
            for (int64_t j = 0; j < Wo; ++j) gp[i * s * W + j * s + place[of[i * Wo + j]]] += go[i * Wo + j];
    }
}

template <typename S>
void forward(const S* x, S* out, uint8_t* off, int64_t planes, int64_t H, int64_t W, int k, int64_t s,
             int threads) {
    if (k == 2) forward_impl<S, 2>(x, out, off, planes, H, W, k, s, threads);
    else if (k == 3) forward_impl<S, 3>(x, out, off, planes, H, W, k, s, threads);
    else forward_impl<S, 0>(x, out, off, planes, H, W, k, s, threads);
}

}  // namespace

extern "C" {

void plif_max_pool_forward_f32(const float* x, float* out, uint8_t* off, int64_t planes, int64_t H, int64_t W,
                               int k, int64_t s, int threads) {
    forward<float>(x, out, off, planes, H, W, k, s, threads);
}

void plif_max_pool_forward_f64(const double* x, double* out, uint8_t* off, int64_t planes, int64_t H, int64_t W,
                               int k, int64_t s, int threads) {
    forward<double>(x, out, off, planes, H, W, k, s, threads);
}

void plif_max_pool_backward_f32(const float* g_out, const uint8_t* off, float* g_x, int64_t planes, int64_t H,
                                int64_t W, int k, int64_t s, int threads) {
    backward<float>(g_out, off, g_x, planes, H, W, k, s, threads);
}

void plif_max_pool_backward_f64(const double* g_out, const uint8_t* off, double* g_x, int64_t planes, int64_t H,
                                int64_t W, int k, int64_t s, int threads) {
    backward<double>(g_out, off, g_x, planes, H, W, k, s, threads);
}

}  // extern "C"
