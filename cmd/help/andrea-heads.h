/* andrea-heads's --help, written by tools/gen-help.py from man/man1/andrea-heads.1:
 * do not edit; run `make help`. */
static const char usage[] =
	"usage: andrea-heads [-f] [-o FILE] [-m MODEL] [--seed S] [--heads N]\n"
	"                    [--random N] [--batch B] [--sequence-seed S]\n"
	"                    [--text | --tokens LIST] [--table] [--device DEV] [-z LEVEL]\n"
	"                    [--threads N] [FILE]\n"
	"\n"
	"options (see the man page for more):\n"
	"  --random N            Score on a random sequence of N tokens repeated twice\n"
	"                        (see The tokens).\n"
	"  --batch B             The number of --random sequences, default 4.\n"
	"  --sequence-seed S     The seed of the --random draws.\n"
	"  --text                The input is text, through the model's tokenizer.\n"
	"  --tokens LIST         The tokens, comma-separated.\n"
	"  --table               Print the table instead of writing the stream.\n"
	"  --device DEV          auto, cpu or cuda.\n"
	"  -o FILE, -f, -z LEVEL, --threads N\n"
	"                        As in every andrea tool (andrea(7)).\n";
