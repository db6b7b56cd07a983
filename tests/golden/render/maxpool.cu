extern "C" __global__ void __launch_bounds__(100) maxpool_b0883573f5(unsigned char* mem, const unsigned long long o0, const unsigned long long o1, const int NUMEL) {
  float* p0 = (float*)(mem + o0);
  const float* p1 = (const float*)(mem + o1);
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= NUMEL) return;
  const int c1 = i / 25;
  const int c2 = (i / 5) % 5;
  const int c3 = (i) % 5;
  const int xb = (0 * 4 + c1) * 81;
  float best = __uint_as_float((unsigned int)(0xff800000u));
  int arg = 0, first = 1;
  for (int k0 = 0; k0 < 3; ++k0) {
    const int ix0 = c2 * 2 - 1 + k0;
    for (int k1 = 0; k1 < 3; ++k1) {
      const int ix1 = c3 * 2 - 1 + k1;
      const float v = (ix0 >= 0 && ix0 < 9 && ix1 >= 0 && ix1 < 9) ? p1[xb + ix0 * 9 + ix1] : __uint_as_float((unsigned int)(0xff800000u));
      if (first || v > best) { best = v; arg = ix0 * 9 + ix1; }
      first = 0;
    }
  }
  p0[i] = best;
}

