kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_ep_a94610101f(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2, const ulong o3, const int IH, const int IW, const int OH, const int OW, const int CIN, const int COUT, const int RB, const int PW, const int SH, const int PH) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  global const float* p3 = (global const float*)(mem + o3);
  const int ox = (int)get_global_id(0) * 16, z = (int)get_global_id(2);
  for (int oy = (int)get_global_id(1) * RB; oy < min((int)get_global_id(1) * RB + RB, OH); ++oy) {
    const int nb = z / (COUT / 8), co = (z % (COUT / 8)) * 8;
    const global float* xb = p1 + (nb * CIN + 0 * 3) * (IH * IW);
    const global float* wb = p2 + co * (3 * 9);
    float16 c0 = (float16)(0.0f);
    float16 c1 = (float16)(0.0f);
    float16 c2 = (float16)(0.0f);
    float16 c3 = (float16)(0.0f);
    float16 c4 = (float16)(0.0f);
    float16 c5 = (float16)(0.0f);
    float16 c6 = (float16)(0.0f);
    float16 c7 = (float16)(0.0f);
    const int ix0 = ox * 1 - PW;
    for (int ci = 0; ci < 3; ++ci) {
      const global float* xc = xb + ci * (IH * IW);
      const global float* wc = wb + ci * 72;
      for (int ky = 0; ky < 3; ++ky) {
        const int iy = oy * SH - PH + ky * 1;
        if ((uint)iy >= (uint)IH) continue;
        const global float* xr = xc + iy * IW;
        for (int kx = 0; kx < 3; ++kx) {
          const int ix = ix0 + kx * 1;
          float16 xv;
          if (ix >= 0 && ix + 16 <= IW) { xv = vload16(0, xr + ix); }
          else {
            const int16 q = ix + 1 * (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            const int16 qc = clamp(q, 0, IW - 1);
            const float16 g = (float16)(xr[qc.s0], xr[qc.s1], xr[qc.s2], xr[qc.s3], xr[qc.s4], xr[qc.s5], xr[qc.s6], xr[qc.s7], xr[qc.s8], xr[qc.s9], xr[qc.sa], xr[qc.sb], xr[qc.sc], xr[qc.sd], xr[qc.se], xr[qc.sf]);
            xv = select((float16)(0.0f), g, (q >= 0) & (q < IW));
          }
          c0 = fma((float16)(wc[(ky * 3 + kx) * 8 + 0]), xv, c0);
          c1 = fma((float16)(wc[(ky * 3 + kx) * 8 + 1]), xv, c1);
          c2 = fma((float16)(wc[(ky * 3 + kx) * 8 + 2]), xv, c2);
          c3 = fma((float16)(wc[(ky * 3 + kx) * 8 + 3]), xv, c3);
          c4 = fma((float16)(wc[(ky * 3 + kx) * 8 + 4]), xv, c4);
          c5 = fma((float16)(wc[(ky * 3 + kx) * 8 + 5]), xv, c5);
          c6 = fma((float16)(wc[(ky * 3 + kx) * 8 + 6]), xv, c6);
          c7 = fma((float16)(wc[(ky * 3 + kx) * 8 + 7]), xv, c7);
        }
      }
    }
    const int plane = OH * OW;
    {
      global float* yr = p0 + (nb * COUT + co + 0) * plane + oy * OW + ox;
      float t[16];
      vstore16(c0, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 0];
        const int o = (nb * COUT + co + 0) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * COUT + co + 1) * plane + oy * OW + ox;
      float t[16];
      vstore16(c1, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 1];
        const int o = (nb * COUT + co + 1) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * COUT + co + 2) * plane + oy * OW + ox;
      float t[16];
      vstore16(c2, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 2];
        const int o = (nb * COUT + co + 2) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * COUT + co + 3) * plane + oy * OW + ox;
      float t[16];
      vstore16(c3, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 3];
        const int o = (nb * COUT + co + 3) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * COUT + co + 4) * plane + oy * OW + ox;
      float t[16];
      vstore16(c4, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 4];
        const int o = (nb * COUT + co + 4) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * COUT + co + 5) * plane + oy * OW + ox;
      float t[16];
      vstore16(c5, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 5];
        const int o = (nb * COUT + co + 5) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * COUT + co + 6) * plane + oy * OW + ox;
      float t[16];
      vstore16(c6, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 6];
        const int o = (nb * COUT + co + 6) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
    {
      global float* yr = p0 + (nb * COUT + co + 7) * plane + oy * OW + ox;
      float t[16];
      vstore16(c7, 0, t);
      for (int j = 0; j < 16 && ox + j < OW; ++j) {
        const float s = t[j] + p3[co + 7];
        const int o = (nb * COUT + co + 7) * plane + oy * OW + ox + j;
        const float t0 = (s < 0 ? 0.0e+00f : s);
        yr[j] = t0;
      }
    }
  }
}

