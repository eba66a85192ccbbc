package dashboard

// LoginFile is the file under the state root through which `loopctl
// dashboard` reaches a running loopd's dashboard: the dashboard's URL and a
// random login key, written 0600 (directory 0700) when the dashboard starts
// and removed when it stops. Whoever can read it can log in — the same
// user that can read the state root.
const LoginFile = "dashboard.json"

// Errors of the login file and tokens.
var (
	// ErrNoDashboard: no running loopd has written the login file.
	ErrNoDashboard = errors.New("no running loopd dashboard (its login file is missing)")
	// ErrBadToken: the login token is malformed, forged, expired or used.
	ErrBadToken = errors.New("login token is invalid, expired or already used")
)

// loginFile is LoginFile's format.
type loginFile struct {
	URL string `json:"url"`
	Key string `json:"key"`
	PID int    `json:"pid"`
}

// WriteLoginFile writes the login file for a dashboard at baseURL with key.
func WriteLoginFile(stateRoot, baseURL string, key []byte) error {
	if err := os.MkdirAll(stateRoot, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(loginFile{URL: baseURL, Key: hex.EncodeToString(key), PID: os.Getpid()})
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(stateRoot, LoginFile), b, 0o600)
}

// RemoveLoginFile removes the login file if it is ours (same key).
func RemoveLoginFile(stateRoot string, key []byte) {
	p := filepath.Join(stateRoot, LoginFile)
	if lf, err := readLoginFile(p); err == nil && lf.Key == hex.EncodeToString(key) {
		_ = os.Remove(p)
	}
}

func readLoginFile(p string) (loginFile, error) {
	var lf loginFile
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return lf, fmt.Errorf("%w: %s; start loopd (loopd run) with the same state root", ErrNoDashboard, p)
	}
	if err != nil {
		return lf, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return lf, fmt.Errorf("dashboard: %s is readable by others (mode %v); refusing it — loopd writes it 0600", p, fi.Mode().Perm())
	}
	if fi.Size() > 4096 {
		return lf, fmt.Errorf("dashboard: %s is too large to be a login file", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return lf, err
	}
	if err := json.Unmarshal(b, &lf); err != nil || lf.URL == "" || len(lf.Key) != 64 {
		return lf, fmt.Errorf("dashboard: %s is not a login file loopd wrote", p)
	}
	return lf, nil
}

// LoginURL reads the login file under stateRoot and mints a one-time login
// URL valid for LoginTTL: <url>/login?token=<nonce>.<expiry>.<hmac>. It
// talks to nobody: the dashboard checks the MAC with the same key and
// accepts each nonce once.
func LoginURL(stateRoot string, now time.Time) (string, error) {
	lf, err := readLoginFile(filepath.Join(stateRoot, LoginFile))
	if err != nil {
		return "", err
	}
	key, err := hex.DecodeString(lf.Key)
	if err != nil {
		return "", fmt.Errorf("dashboard: login file key: %w", err)
	}
	return strings.TrimSuffix(lf.URL, "/") + "/login?token=" + url.QueryEscape(MintToken(key, now)), nil
}

// MintToken returns a one-time login token under key valid until
// now+LoginTTL.
func MintToken(key []byte, now time.Time) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	body := hex.EncodeToString(nonce[:]) + "." + strconv.FormatInt(now.Add(LoginTTL).Unix(), 10)
	return body + "." + tokenMAC(key, body)
}

func tokenMAC(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("theloop-dashboard-login\x00" + body))
	return hex.EncodeToString(m.Sum(nil))
}

