extern "C" __global__ void __launch_bounds__(256) conv_ep_11e430eb92(unsigned char* mem, const unsigned long long o0, const unsigned long long o1, const unsigned long long o2, const int NUMEL) {
  float* p0 = (float*)(mem + o0);
  const float* p1 = (const float*)(mem + o1);
  const float* p2 = (const float*)(mem + o2);
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= NUMEL) return;
  const int c1 = i / 256;
  const int c2 = (i / 16) % 16;
  const int c3 = (i) % 16;
  float acc = 0;
  const int xb = (0 * 8 + (c1 / 1) * 1) * 256;
  const int wb = c1 * 9;
  for (int ci = 0; ci < 1; ++ci) {
    for (int k0 = 0; k0 < 3; ++k0) {
      const int ix0 = c2 - 1 + k0;
      if (ix0 < 0 || ix0 >= 16) continue;
      for (int k1 = 0; k1 < 3; ++k1) {
        const int ix1 = c3 - 1 + k1;
        if (ix1 < 0 || ix1 >= 16) continue;
        acc += p1[xb + ci * 256 + ix0 * 16 + ix1] * p2[wb + ci * 9 + k0 * 3 + k1];
      }
    }
  }
  const float t0 = (acc < 0 ? 0.0e+00f : acc);
  p0[i] = t0;
}

