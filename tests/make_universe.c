/* Writes a small raw universe in the layout of the CosmoFlow simulations' HDF5 files, for
   the cf-convert universe test: 'full' int16 (N,N,N,4) with value(x,y,z,c) =
   (x*N + y)*N + z + 1000 c (a position code), 'unitPar' float32 (4).  Usage: make_universe OUT.hdf5 N */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int N = argc > 2 ? atoi(argv[2]) : 16, x, y, z, c;
    hsize_t dims[4] = {(hsize_t)N, (hsize_t)N, (hsize_t)N, 4}, pd[1] = {4};
    short *v = malloc(sizeof(short) * N * N * N * 4);
    float par[4] = {0.25f, -0.5f, 0.75f, -1.0f};
    hid_t f, sp, ds;
    if (argc < 2 || !v || N > 30) { fprintf(stderr, "usage: make_universe OUT.hdf5 [N <= 30]\n"); return 1; }
    for (x = 0; x < N; x++) for (y = 0; y < N; y++) for (z = 0; z < N; z++) for (c = 0; c < 4; c++)
        v[(((size_t)x * N + y) * N + z) * 4 + c] = (short)((x * N + y) * N + z + 1000 * c);
    f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    sp = H5Screate_simple(4, dims, NULL);
    ds = H5Dcreate2(f, "full", H5T_STD_I16LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_SHORT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds); H5Sclose(sp);
    sp = H5Screate_simple(1, pd, NULL);
    ds = H5Dcreate2(f, "unitPar", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, par);
    H5Dclose(ds); H5Sclose(sp); H5Fclose(f);
    free(v);
    return 0;
}
