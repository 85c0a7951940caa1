/* Calls unnamed_spin (tests/programs/unnamed_asm.S): tests/native.rs. */
long unnamed_spin(long);
int main(int argc, char **argv) {
    (void)argv;
    return (int)unnamed_spin(argc);
}
