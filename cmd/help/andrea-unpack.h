/* andrea-unpack's --help, written by tools/gen-help.py from man/man1/andrea-unpack.1:
 * do not edit; run `make help`. */
static const char usage[] =
	"usage: andrea-unpack [-d DIR] [--threads N] [FILE ...]\n"
	"\n"
	"options (see the man page for more):\n"
	"  -d DIR, --directory=DIR\n"
	"                        Write into DIR (default: the current directory).\n"
	"  --threads N           Decompress with N threads, 1 to 256 (default: the number\n"
	"                        of online processors, at most 64, or ANDREA_THREADS).\n"
	"  -h, --help            Print the synopsis and a line for each option, and exit.\n"
	"  --version             Print the version and exit.\n";
