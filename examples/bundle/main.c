/* Run a glow bundle: load its weights, fill its inputs, run it, print (and save) its outputs.
 *
 *   glow bundle model.onnx -o build            # build/net.o, build/net.h, build/net.weights.bin
 *   cc -O2 -std=c11 -I build examples/bundle/main.c build/net.o -lm -o run-net
 *   ./run-net build/net.weights.bin [inputs.bin|-] [outputs.bin|-] [repeats]
 *
 * inputs.bin holds every input's raw bytes, one after another in the header's order (without it,
 * or with "-", inputs are a fixed pattern); outputs.bin receives every output's raw bytes the same
 * way. With repeats > 1 it prints the median time of one inference. Nothing here is
 * model-specific: everything comes from net.h.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net.h"

static uint8_t *aligned_buffer(size_t size) {
    size_t rounded = (size + NET_ALIGNMENT - 1) / NET_ALIGNMENT * NET_ALIGNMENT;
    uint8_t *p = aligned_alloc(NET_ALIGNMENT, rounded ? rounded : NET_ALIGNMENT);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", size);
        exit(1);
    }
    memset(p, 0, rounded);
    return p;
}

static void read_exactly(const char *path, uint8_t *dst, size_t size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t got = fread(dst, 1, size, f);
    if (got != size || fgetc(f) != EOF) {
        fprintf(stderr, "%s: expected exactly %zu bytes\n", path, size);
        exit(2);
    }
    fclose(f);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s net.weights.bin [inputs.bin|-] [outputs.bin|-] [repeats]\n", argv[0]);
        return 2;
    }
    size_t n_tensors = NET_NUM_INPUTS + NET_NUM_OUTPUTS;
    uint8_t *weights = aligned_buffer(NET_CONSTANT_WEIGHTS_SIZE);
    uint8_t *mutable_weights = aligned_buffer(NET_MUTABLE_WEIGHTS_SIZE);
    uint8_t *activations = aligned_buffer(NET_ACTIVATIONS_SIZE);
    read_exactly(argv[1], weights, NET_CONSTANT_WEIGHTS_SIZE);

    size_t in_bytes = 0;
    for (size_t i = 0; i < NET_NUM_INPUTS; i++) in_bytes += net_tensors[i].size;
    if (argc > 2 && strcmp(argv[2], "-") != 0) {
        uint8_t *packed = malloc(in_bytes ? in_bytes : 1);
        read_exactly(argv[2], packed, in_bytes);
        for (size_t i = 0, at = 0; i < NET_NUM_INPUTS; at += net_tensors[i].size, i++)
            memcpy(mutable_weights + net_tensors[i].offset, packed + at, net_tensors[i].size);
        free(packed);
    } else {  /* a fixed pattern: floats in [0, 0.6], integers 0..2 (valid as indices too) */
        for (size_t i = 0; i < NET_NUM_INPUTS; i++) {
            uint8_t *p = mutable_weights + net_tensors[i].offset;
            size_t size = net_tensors[i].size;
            if (strcmp(net_tensors[i].dtype, "float32") == 0)
                for (size_t k = 0; k < size / 4; k++) ((float *)p)[k] = (float)(k % 7) * 0.1f;
            else if (strcmp(net_tensors[i].dtype, "int64") == 0)
                for (size_t k = 0; k < size / 8; k++) ((int64_t *)p)[k] = (int64_t)(k % 3);
            else if (strcmp(net_tensors[i].dtype, "int32") == 0)
                for (size_t k = 0; k < size / 4; k++) ((int32_t *)p)[k] = (int32_t)(k % 3);
        }
    }

    int repeats = argc > 4 ? atoi(argv[4]) : 1;
    if (repeats < 1) repeats = 1;
    double *times = malloc(sizeof(double) * (size_t)repeats);
    for (int r = 0; r < repeats; r++) {
        double t0 = now();
        int rc = net(weights, mutable_weights, activations);
        times[r] = now() - t0;
        if (rc != 0) {
            fprintf(stderr, "net() returned %d: an index input was out of range\n", rc);
            return 3;
        }
    }
    qsort(times, (size_t)repeats, sizeof(double), by_value);
    if (repeats > 1) printf("median %.3f ms over %d runs\n", times[repeats / 2] * 1e3, repeats);

    FILE *out = argc > 3 && strcmp(argv[3], "-") != 0 ? fopen(argv[3], "wb") : NULL;
    for (size_t i = NET_NUM_INPUTS; i < n_tensors; i++) {
        const net_tensor_info *t = &net_tensors[i];
        printf("%s: %s, %zu bytes", t->name, t->dtype, t->size);
        if (strcmp(t->dtype, "float32") == 0 && t->size >= sizeof(float)) {
            const float *v = (const float *)(mutable_weights + t->offset);
            double sum = 0;
            for (size_t k = 0; k < t->size / sizeof(float); k++) sum += v[k];
            printf(", first %g, sum %g", v[0], sum);
        }
        printf("\n");
        if (out) fwrite(mutable_weights + t->offset, 1, t->size, out);
    }
    if (out) fclose(out);
    free(times);
    free(weights);
    free(mutable_weights);
    free(activations);
    return 0;
}
