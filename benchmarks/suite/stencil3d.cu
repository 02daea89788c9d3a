// Scientific: one Jacobi step of the 3-D heat equation (7-point stencil) on an nz x ny x nx
// grid, FP32: out = in + alpha * (sum of the six neighbours - 6 * in) inside, boundary copied.
// First version: one thread per point, every neighbour read from global memory.
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.nz = [1, 7, 40, 256]
sizes.ny = [1, 9, 33, 256]
sizes.nx = [1, 31, 65, 256]
grid = ["cdiv(nx, 32)", "cdiv(ny, 8)", "nz"]
block = [32, 8, 1]
args.in = "float32[nz * ny * nx]"
args.out = "out float32[nz * ny * nx]"
args.nz = "nz"
args.ny = "ny"
args.nx = "nx"
args.alpha = "0.1"
flops = "9 * nz * ny * nx"
*/
extern "C" __global__ void stencil3d_f32(const float* in, float* out, int nz, int ny, int nx,
                                         float alpha)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    size_t plane = (size_t)ny * nx;
    size_t i = z * plane + (size_t)y * nx + x;
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) {
        out[i] = in[i];
    } else {
        float neighbours = in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] + in[i - plane] + in[i + plane];
        out[i] = in[i] + alpha * (neighbours - 6.0f * in[i]);
    }
}

int main()
{
    const int nz = 40, ny = 33, nx = 65;
    const size_t count = (size_t)nz * ny * nx;
    float *in, *out;
    cudaMalloc(&in, count * sizeof(float));
    cudaMalloc(&out, count * sizeof(float));
    cudaMemset(in, 0, count * sizeof(float));
    dim3 block(32, 8, 1);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8, nz);
    stencil3d_f32<<<grid, block>>>(in, out, nz, ny, nx, 0.1f);
    cudaError_t err = cudaDeviceSynchronize();
    printf("stencil3d: %s\n", cudaGetErrorString(err));
    cudaFree(in); cudaFree(out);
    return err == cudaSuccess ? 0 : 1;
}
