// Used only when cuRAND's headers are not installed (a warning says so at the #include): the
// cuRAND device API's names, so that the rest of the file is still checked instead of failing on
// every `curandState`. Bodies are placeholders: resources of kernels that call cuRAND leave out
// cuRAND's own code.
#pragma once

struct curandStateXORWOW {
  unsigned int d, v[5];
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStateXORWOW curandStateXORWOW_t;
typedef struct curandStateXORWOW curandState_t;
typedef struct curandStateXORWOW curandState;
struct curandStatePhilox4_32_10 {
  uint4 ctr, output;
  uint2 key;
  unsigned int STATE;
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;
struct curandStateMRG32k3a {
  unsigned int s1[3], s2[3];
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStateMRG32k3a curandStateMRG32k3a_t;
struct curandStateSobol32 {
  unsigned int i, x, c, direction_vectors[32];
};
typedef struct curandStateSobol32 curandStateSobol32_t;
typedef unsigned int curandDirectionVectors32_t[32];

template <class State>
__device__ inline void curand_init(unsigned long long, unsigned long long, unsigned long long,
                                   State*) {}
template <class State>
__device__ inline void curand_init(unsigned int*, unsigned int, State*) {}
template <class State>
__device__ inline void skipahead(unsigned long long, State*) {}
template <class State>
__device__ inline void skipahead_sequence(unsigned long long, State*) {}
template <class State>
__device__ inline unsigned int curand(State*) { return 0u; }
template <class State>
__device__ inline uint4 curand4(State*) { return make_uint4(0u, 0u, 0u, 0u); }
template <class State>
__device__ inline float curand_uniform(State*) { return 0.5f; }
template <class State>
__device__ inline double curand_uniform_double(State*) { return 0.5; }
template <class State>
__device__ inline float4 curand_uniform4(State*) { return make_float4(0.5f, 0.5f, 0.5f, 0.5f); }
template <class State>
__device__ inline double2 curand_uniform2_double(State*) { return make_double2(0.5, 0.5); }
template <class State>
__device__ inline float curand_normal(State*) { return 0.0f; }
template <class State>
__device__ inline double curand_normal_double(State*) { return 0.0; }
template <class State>
__device__ inline float2 curand_normal2(State*) { return make_float2(0.0f, 0.0f); }
template <class State>
__device__ inline double2 curand_normal2_double(State*) { return make_double2(0.0, 0.0); }
template <class State>
__device__ inline float4 curand_normal4(State*) { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
template <class State>
__device__ inline float curand_log_normal(State*, float, float) { return 1.0f; }
template <class State>
__device__ inline double curand_log_normal_double(State*, double, double) { return 1.0; }
template <class State>
__device__ inline unsigned int curand_poisson(State*, double) { return 0u; }
