// A dot product of two float32 vectors added into one float: thread 0 of block 0 adds the
// products in order, then adds that to out[0] (the other blocks and threads are idle; `out` is
// inout, zero in the listed cases, not in the hidden range cases: the candidates' atomics add
// into it too).
/* @cuda-llm
sizes.n = [1, 1000, 262144]
grid = 64
block = 256
args.a = "float32[n]"
args.b = "float32[n]"
args.out = "inout float32[1]"
args.n = "n"
init.out = "zeros()"
*/
extern "C" __global__ void dot(const float* a, const float* b, float* out, int n) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += a[i] * b[i];
    out[0] += acc;
}
