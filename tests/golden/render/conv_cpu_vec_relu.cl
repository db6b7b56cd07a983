kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_ep_02d1423ba8(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2, const ulong o3) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  global const float* p3 = (global const float*)(mem + o3);
  const int ox = (int)get_global_id(0) * 16, z = (int)get_global_id(2);
  for (int oy = (int)get_global_id(1) * 2; oy < min((int)get_global_id(1) * 2 + 2, 32); ++oy) {
    const int nb = z / 2, co = (z % 2) * 8;
    const global float* xb = p1 + (nb * 3 + 0 * 3) * 1024;
    const global float* wb = p2 + co * 27;
    float16 c0 = (float16)(0.0f);
    float16 c1 = (float16)(0.0f);
    float16 c2 = (float16)(0.0f);
    float16 c3 = (float16)(0.0f);
    float16 c4 = (float16)(0.0f);
    float16 c5 = (float16)(0.0f);
    float16 c6 = (float16)(0.0f);
    float16 c7 = (float16)(0.0f);
    const int ix0 = ox * 1 - 1;
    for (int ci = 0; ci < 3; ++ci) {
      const global float* xc = xb + ci * 1024;
      const global float* wc = wb + ci * 9;
      for (int ky = 0; ky < 3; ++ky) {
        const int iy = oy * 1 - 1 + ky * 1;
        if (iy < 0 || iy >= 32) continue;
        const global float* xr = xc + iy * 32;
        for (int kx = 0; kx < 3; ++kx) {
          const int ix = ix0 + kx * 1;
          float16 xv;
          if (ix >= 0 && ix + 16 <= 32) { xv = vload16(0, xr + ix); }
          else {
            const int16 q = ix + 1 * (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            const int16 qc = clamp(q, 0, 31);
            const float16 g = (float16)(xr[qc.s0], xr[qc.s1], xr[qc.s2], xr[qc.s3], xr[qc.s4], xr[qc.s5], xr[qc.s6], xr[qc.s7], xr[qc.s8], xr[qc.s9], xr[qc.sa], xr[qc.sb], xr[qc.sc], xr[qc.sd], xr[qc.se], xr[qc.sf]);
            xv = select((float16)(0.0f), g, (q >= 0) & (q < 32));
          }
          c0 = fma((float16)(wc[0 + ky * 3 + kx]), xv, c0);
          c1 = fma((float16)(wc[27 + ky * 3 + kx]), xv, c1);
          c2 = fma((float16)(wc[54 + ky * 3 + kx]), xv, c2);
          c3 = fma((float16)(wc[81 + ky * 3 + kx]), xv, c3);
          c4 = fma((float16)(wc[108 + ky * 3 + kx]), xv, c4);
          c5 = fma((float16)(wc[135 + ky * 3 + kx]), xv, c5);
          c6 = fma((float16)(wc[162 + ky * 3 + kx]), xv, c6);
          c7 = fma((float16)(wc[189 + ky * 3 + kx]), xv, c7);
        }
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 0) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c0, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 0];
        const int o = (nb * 16 + co + 0) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 1) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c1, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 1];
        const int o = (nb * 16 + co + 1) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 2) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c2, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 2];
        const int o = (nb * 16 + co + 2) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 3) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c3, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 3];
        const int o = (nb * 16 + co + 3) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 4) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c4, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 4];
        const int o = (nb * 16 + co + 4) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 5) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c5, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 5];
        const int o = (nb * 16 + co + 5) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 6) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c6, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 6];
        const int o = (nb * 16 + co + 6) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * 16 + co + 7) * 1024 + oy * 32 + ox;
      float t[16];
      vstore16(c7, 0, t);
      for (int j = 0; j < 16 && ox + j < 32; ++j) {
        const float s = t[j] + p3[co + 7];
        const int o = (nb * 16 + co + 7) * 1024 + oy * 32 + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
  }
}

