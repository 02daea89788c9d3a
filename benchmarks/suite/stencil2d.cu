// Scientific: one Jacobi step of the 2-D Laplace equation (5-point stencil) on an ny x nx
// grid, FP32: interior points take the mean of their four neighbours, boundary points are
// copied. First version: one thread per point, every neighbour read from global memory.
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.ny = [1, 17, 1000, 4096]
sizes.nx = [1, 33, 999, 4096]
tune.BLOCK_X = [32, 8, 16, 64, 128]
tune.BLOCK_Y = [8, 1, 2, 4, 16, 32]
restrict = ["BLOCK_X * BLOCK_Y <= 1024", "BLOCK_X * BLOCK_Y >= 32"]
grid = ["cdiv(nx, BLOCK_X)", "cdiv(ny, BLOCK_Y)"]
block = ["BLOCK_X", "BLOCK_Y"]
args.in = "float32[ny * nx]"
args.out = "out float32[ny * nx]"
args.ny = "ny"
args.nx = "nx"
flops = "4 * ny * nx"
*/
extern "C" __global__ void stencil2d_f32(const float* in, float* out, int ny, int nx)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t i = (size_t)y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
    } else {
        out[i] = 0.25f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
    }
}

int main()
{
    const int ny = 1000, nx = 999;
    float *in, *out;
    cudaMalloc(&in, (size_t)ny * nx * sizeof(float));
    cudaMalloc(&out, (size_t)ny * nx * sizeof(float));
    cudaMemset(in, 0, (size_t)ny * nx * sizeof(float));
    dim3 block(32, 8);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8);
    stencil2d_f32<<<grid, block>>>(in, out, ny, nx);
    cudaError_t err = cudaDeviceSynchronize();
    printf("stencil2d: %s\n", cudaGetErrorString(err));
    cudaFree(in); cudaFree(out);
    return err == cudaSuccess ? 0 : 1;
}
