__device__ __forceinline__ float glow_h2f(unsigned short h) {
  unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return __uint_as_float((unsigned int)(s | 0x7f800000u | (m << 13)));
  if (e == 0u) {
    float f = (float)m * 5.9604644775390625e-8f;  /* m * 2^-24: subnormal (or zero) */
    return s ? -f : f;
  }
  return __uint_as_float((unsigned int)(s | ((e + 112u) << 23) | (m << 13)));
}
__device__ __forceinline__ unsigned short glow_f2h(float f) {
  unsigned int x = __float_as_uint(f), s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);  /* rounds past 65504: inf */
  if (a < 0x38800000u) {  /* below 2^-14: subnormal half, round to nearest even */
    if (a < 0x33000000u) return (unsigned short)s;
    unsigned int m = (a & 0x7fffffu) | 0x800000u, sh = 126u - (a >> 23);
    unsigned int q = m >> sh, rem = m & ((1u << sh) - 1u), mid = 1u << (sh - 1u);
    q += (rem > mid || (rem == mid && (q & 1u))) ? 1u : 0u;
    return (unsigned short)(s | q);
  }
  unsigned int r = a - 0x38000000u;  /* rebias the exponent by 127 - 15 */
  r += 0xfffu + ((r >> 13) & 1u);
  return (unsigned short)(s | (r >> 13));
}
extern "C" __global__ void __launch_bounds__(12) add_d504725cb9(unsigned char* mem, const unsigned long long o0, const unsigned long long o1, const unsigned long long o2, const int NUMEL) {
  unsigned short* p0 = (unsigned short*)(mem + o0);
  const unsigned short* p1 = (const unsigned short*)(mem + o1);
  const unsigned short* p2 = (const unsigned short*)(mem + o2);
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= NUMEL) return;
  const float a0 = glow_h2f(p1[i]);
  const float a1 = glow_h2f(p2[(i % 3)]);
  const float t0 = glow_h2f(glow_f2h(a0 + a1));
  p0[i] = glow_f2h(t0);
}

