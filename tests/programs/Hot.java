// A JVM worker with two known hot methods (tests/jit.rs): `alpha` and
// `beta` share the time, called from `main`'s loop; `java Hot SECONDS`.
public class Hot {
    static long alpha(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) {
            s += (i * 31) ^ (s >>> 3);
        }
        return s;
    }

    static long beta(long n) {
        long s = 1;
        for (long i = 0; i < n; i++) {
            s = s * 6364136223846793005L + i;
            s ^= s >>> 17;
        }
        return s;
    }

    public static void main(String[] args) {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        long acc = 0;
        System.out.println("started");
        System.out.flush();
        while (System.nanoTime() < end) {
            acc += alpha(200_000);
            acc += beta(200_000);
        }
        System.out.println(acc);
    }
}
