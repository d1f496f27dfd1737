// The exported fp64 entry points of the templates in cpu_neuron.h.
#include "cpu_neuron.h"

extern "C" {

void plif_forward_f64(const double* x, const double* k, const double* v0, double* s, double* h, double* v_last,
                      int64_t T, int64_t N, int64_t x_step, int leak, int hard, int k_full, double v_th,
                      double v_reset, int threads) {
    forward<double, double>(x, k, v0, s, h, v_last, T, N, x_step, leak, hard, k_full, v_th, v_reset, threads);
}

void plif_backward_f64(const double* g_s, const double* g_v_last, const double* h, const double* v0,
                       const double* k, double* g_x, double* g_v0, double* g_k, int64_t T, int64_t N, int leak,
                       int hard, int detach, int surrogate, int k_full, int need_k, double v_th, double v_reset,
                       double sg_a, double sg_b, int threads) {
    backward<double, double>(g_s, g_v_last, h, v0, k, g_x, g_v0, g_k, T, N, leak, hard, detach, surrogate, k_full, need_k,
                     v_th, v_reset, sg_a, sg_b, threads);
}

}  // extern "C"
