extern "C" __global__ void __launch_bounds__(128) fused_fd43140ec9(unsigned char* mem, const unsigned long long o0, const unsigned long long o1, const unsigned long long o2, const unsigned long long o3, const int NUMEL) {
  float* p0 = (float*)(mem + o0);
  const float* p1 = (const float*)(mem + o1);
  const float* p2 = (const float*)(mem + o2);
  const float* p3 = (const float*)(mem + o3);
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= NUMEL) return;
  const float a0 = p1[i];
  const float a1 = p2[i];
  const float t0 = a0 * a1;
  const float a2 = p3[(i / 16)];
  const float t1 = t0 + a2;
  const float t2 = (t1 < 0 ? 0.0e+00f : t1);
  p0[i] = t2;
}

