// The Java oracle in one JVM: runs the dataset's Main of many programs, each compiled into a package of
// its own (p<problem>_<version>.Main), a few at a time, each in its own thread with a time limit.
//
//   java -cp classes OracleBatch <timeout seconds> <package>...
//
// Reads a nonce from stdin first; writes `<nonce>\t<package>\t<passed|failed|timeout>\t<detail>` per
// program, then `<nonce>\tend`, and halts. A program still running at its limit is stopped (Thread.stop,
// still there in Java 17) and reads `timeout`. The dataset's code is trusted; the whole batch runs in one
// confined process, and any program without a line is run again on its own by the host.
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicReference;

public final class OracleBatch {
    private OracleBatch() {}

    private static String clean(String s) {
        String t = s == null ? "" : s.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
        return t.length() > 500 ? t.substring(0, 500) : t;
    }

    @SuppressWarnings({"deprecation", "removal"})
    private static String[] runOne(String pkg, long timeoutMs) throws InterruptedException {
        AtomicReference<String[]> result = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                Method main = Class.forName(pkg + ".Main").getMethod("main", String[].class);
                main.invoke(null, (Object) new String[0]);
                result.set(new String[] {"passed", "passed"});
            } catch (InvocationTargetException e) {
                Throwable c = e.getCause();
                result.set(new String[] {"failed", c.getClass().getName() + (c.getMessage() == null ? "" : ": " + c.getMessage())});
            } catch (Throwable e) {
                result.set(new String[] {"failed", e.getClass().getName() + ": " + e.getMessage()});
            }
        }, pkg);
        t.setDaemon(true);
        t.start();
        t.join(timeoutMs);
        if (t.isAlive()) {
            t.stop();
            t.join(2000);
            return new String[] {"timeout", "timeout after " + (timeoutMs / 1000) + " s"};
        }
        String[] r = result.get();
        return r == null ? new String[] {"failed", "no result"} : r;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String nonce = in.readLine();
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        if (nonce == null || nonce.isEmpty()) Runtime.getRuntime().halt(3);
        long timeoutMs = (long) (Double.parseDouble(args[0]) * 1000);
        for (int i = 1; i < args.length; i++) {
            String[] r = runOne(args[i], timeoutMs);
            out.println(nonce + "\t" + args[i] + "\t" + r[0] + "\t" + clean(r[1]));
        }
        out.println(nonce + "\tend");
        out.flush();
        Runtime.getRuntime().halt(0);
    }
}
