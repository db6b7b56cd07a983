kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_4429e55bca(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  const int qb = (int)get_global_id(0) * 8, co = (int)get_global_id(1) * 16, nb = (int)get_global_id(2);
  const global float* xb = p1 + (nb * 8 + 0 * 8) * 49;
  const global float* wb = p2 + (co / 16) * 1152;
  float16 c0 = (float16)(0.0f);
  const int q0 = min(qb + 0, 48);
  const int y0 = (q0 / 7) * 1 - 1, x0 = (q0 % 7) * 1 - 1;
  float16 c1 = (float16)(0.0f);
  const int q1 = min(qb + 1, 48);
  const int y1 = (q1 / 7) * 1 - 1, x1 = (q1 % 7) * 1 - 1;
  float16 c2 = (float16)(0.0f);
  const int q2 = min(qb + 2, 48);
  const int y2 = (q2 / 7) * 1 - 1, x2 = (q2 % 7) * 1 - 1;
  float16 c3 = (float16)(0.0f);
  const int q3 = min(qb + 3, 48);
  const int y3 = (q3 / 7) * 1 - 1, x3 = (q3 % 7) * 1 - 1;
  float16 c4 = (float16)(0.0f);
  const int q4 = min(qb + 4, 48);
  const int y4 = (q4 / 7) * 1 - 1, x4 = (q4 % 7) * 1 - 1;
  float16 c5 = (float16)(0.0f);
  const int q5 = min(qb + 5, 48);
  const int y5 = (q5 / 7) * 1 - 1, x5 = (q5 % 7) * 1 - 1;
  float16 c6 = (float16)(0.0f);
  const int q6 = min(qb + 6, 48);
  const int y6 = (q6 / 7) * 1 - 1, x6 = (q6 % 7) * 1 - 1;
  float16 c7 = (float16)(0.0f);
  const int q7 = min(qb + 7, 48);
  const int y7 = (q7 / 7) * 1 - 1, x7 = (q7 % 7) * 1 - 1;
  for (int ci = 0; ci < 8; ++ci) {
    const global float* xc = xb + ci * 49;
    for (int ky = 0; ky < 3; ++ky) {
      for (int kx = 0; kx < 3; ++kx) {
        const float16 wv = vload16((ci * 3 + ky) * 3 + kx, wb);
        { const int iy = y0 + ky * 1, ix = x0 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c0 = fma((float16)(v), wv, c0); }
        { const int iy = y1 + ky * 1, ix = x1 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c1 = fma((float16)(v), wv, c1); }
        { const int iy = y2 + ky * 1, ix = x2 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c2 = fma((float16)(v), wv, c2); }
        { const int iy = y3 + ky * 1, ix = x3 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c3 = fma((float16)(v), wv, c3); }
        { const int iy = y4 + ky * 1, ix = x4 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c4 = fma((float16)(v), wv, c4); }
        { const int iy = y5 + ky * 1, ix = x5 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c5 = fma((float16)(v), wv, c5); }
        { const int iy = y6 + ky * 1, ix = x6 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c6 = fma((float16)(v), wv, c6); }
        { const int iy = y7 + ky * 1, ix = x7 + kx * 1;
          const float v = (iy >= 0 && iy < 7 && ix >= 0 && ix < 7) ? xc[iy * 7 + ix] : 0.0f;
          c7 = fma((float16)(v), wv, c7); }
      }
    }
  }
  if (qb + 0 < 49) {
    float t[16];
    vstore16(c0, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q0;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 1 < 49) {
    float t[16];
    vstore16(c1, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q1;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 2 < 49) {
    float t[16];
    vstore16(c2, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q2;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 3 < 49) {
    float t[16];
    vstore16(c3, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q3;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 4 < 49) {
    float t[16];
    vstore16(c4, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q4;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 5 < 49) {
    float t[16];
    vstore16(c5, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q5;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 6 < 49) {
    float t[16];
    vstore16(c6, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q6;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 7 < 49) {
    float t[16];
    vstore16(c7, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * 32 + co + j) * 49 + q7;
      const float s = t[j];
      p0[o] = s;
    }
  }
}

