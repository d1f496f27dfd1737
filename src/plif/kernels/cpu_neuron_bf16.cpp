// The exported bf16 entry points of the templates in cpu_neuron.h.
#include "cpu_neuron.h"

extern "C" {

// bf16 x and spikes (dL/dS and dL/dX in backward), passed as their uint16 bits; fp32 k, state and H
void plif_forward_bf16(const uint16_t* x, const float* k, const float* v0, uint16_t* s, float* h, float* v_last,
                       int64_t T, int64_t N, int64_t x_step, int leak, int hard, int k_full, double v_th,
                       double v_reset, int threads) {
    forward<bf16, float>(reinterpret_cast<const bf16*>(x), k, v0, reinterpret_cast<bf16*>(s), h, v_last, T, N,
                         x_step, leak, hard, k_full, v_th, v_reset, threads);
}

void plif_backward_bf16(const uint16_t* g_s, const float* g_v_last, const float* h, const float* v0,
                        const float* k, uint16_t* g_x, float* g_v0, float* g_k, int64_t T, int64_t N, int leak,
                        int hard, int detach, int surrogate, int k_full, int need_k, double v_th, double v_reset,
                        double sg_a, double sg_b, int threads) {
    backward<bf16, float>(reinterpret_cast<const bf16*>(g_s), g_v_last, h, v0, k, reinterpret_cast<bf16*>(g_x),
                          g_v0, g_k, T, N, leak, hard, detach, surrogate, k_full, need_k, v_th, v_reset, sg_a,
                          sg_b, threads);
}

}  // extern "C"
