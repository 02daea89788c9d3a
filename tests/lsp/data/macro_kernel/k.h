#define __kernel extern "C" __global__
