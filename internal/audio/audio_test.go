package audio

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WAV is a PCM WAV file of secs seconds of silence at 8 kHz, 8 bits, mono,
// with extra (e.g. a marker) in a chunk of its own before the data.
func WAV(secs float64, extra string) []byte {
	n := int(secs * 8000)
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(0)) // patched below
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1))    // PCM
	le(uint16(1))    // mono
	le(uint32(8000)) // sample rate
	le(uint32(8000)) // bytes a second
	le(uint16(1))    // block align
	le(uint16(8))    // bits
	if extra != "" {
		b.WriteString("note")
		le(uint32(len(extra)))
		b.WriteString(extra)
		if len(extra)%2 == 1 {
			b.WriteByte(0)
		}
	}
	b.WriteString("data")
	le(uint32(n))
	b.Write(bytes.Repeat([]byte{0x80}, n))
	out := b.Bytes()
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

// oggPage is one Ogg page of serial s with body, ending at granule.
func oggPage(s uint32, granule uint64, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("OggS")
	b.Write([]byte{0, 0})
	_ = binary.Write(&b, binary.LittleEndian, granule)
	_ = binary.Write(&b, binary.LittleEndian, s)
	b.Write(make([]byte, 8)) // sequence, checksum
	var segs []byte
	for n := len(body); ; n -= 255 {
		if n < 255 {
			segs = append(segs, byte(n))
			break
		}
		segs = append(segs, 255)
	}
	b.WriteByte(byte(len(segs)))
	b.Write(segs)
	b.Write(body)
	return b.Bytes()
}

func opusHead(preSkip uint16) []byte {
	h := []byte("OpusHead\x01\x01\x00\x00\x80\xbb\x00\x00\x00\x00\x00")
	binary.LittleEndian.PutUint16(h[10:], preSkip)
	return h
}

func mp3Frames(n int) []byte {
	// MPEG-1 layer III, 128 kbit/s, 44.1 kHz, no padding: 417 bytes, 1152 samples.
	f := append([]byte{0xFF, 0xFB, 0x90, 0x00}, make([]byte, 413)...)
	return bytes.Repeat(f, n)
}

func mp4(scale, dur uint32) []byte {
	box := func(name string, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
		return append(append(b, name...), body...)
	}
	mvhd := make([]byte, 100)
	binary.BigEndian.PutUint32(mvhd[12:], scale)
	binary.BigEndian.PutUint32(mvhd[16:], dur)
	return append(box("ftyp", []byte("isom\x00\x00\x02\x00")), box("moov", box("mvhd", mvhd))...)
}

func flac(rate, total uint64) []byte {
	si := make([]byte, 34)
	si[10], si[11], si[12] = byte(rate>>12), byte(rate>>4), byte(rate<<4)
	si[13] = byte(total >> 32 & 0x0F)
	binary.BigEndian.PutUint32(si[14:], uint32(total))
	return append([]byte("fLaC\x80\x00\x00\x22"), si...)
}

func TestDuration(t *testing.T) {
	vorbis := append([]byte("\x01vorbis\x00\x00\x00\x00\x01"), 0x44, 0xAC, 0, 0, 0, 0, 0, 0) // 44100 Hz
	for _, tc := range []struct {
		name string
		data []byte
		want time.Duration
		err  string
	}{
		{"wav", WAV(2.5, "SAY: hello"), 2500 * time.Millisecond, ""},
		{"wav data size past the end", WAV(1, "")[:44+4000], 500 * time.Millisecond, ""},
		{"wav without data", WAV(1, "")[:36], 0, "without a data chunk"},
		{"opus", append(append(oggPage(7, 0, opusHead(312)), oggPage(7, math64(-1), []byte("OpusTags"))...),
			oggPage(7, 48000*3+312, []byte("audio"))...), 3 * time.Second, ""},
		{"opus with a damaged page and another stream", append(append(append(oggPage(7, 0, opusHead(0)), []byte("OggSjunk-junk-junk-junk-junk-junk")...),
			oggPage(9, 48000*100, []byte("other stream"))...), oggPage(7, 48000*4, []byte("audio"))...), 4 * time.Second, ""},
		{"vorbis", append(oggPage(1, 0, vorbis), oggPage(1, 44100*2, []byte("x"))...), 2 * time.Second, ""},
		{"ogg of another codec", oggPage(1, 10, []byte("\x7fFLAC")), 0, "other than Opus or Vorbis"},
		{"mp3", mp3Frames(100), 100 * (1152 * time.Second / 44100), ""},
		{"mp3 after an ID3 tag, resynchronised after noise", append(append(append([]byte("ID3\x04\x00\x00\x00\x00\x00\x05hello"), mp3Frames(10)...),
			[]byte("\xFF\xFBnoise")...), mp3Frames(10)...), 20 * (1152 * time.Second / 44100), ""},
		{"mp3 noise", []byte("\xFF\xFB\x90\x00 not a second frame"), 0, "without audio frames"},
		{"mp4", mp4(600, 5400), 9 * time.Second, ""},
		{"mp4 without moov", mp4(600, 5400)[:16], 0, "without a movie box"},
		{"flac", flac(16000, 16000*7), 7 * time.Second, ""},
		{"a forged day-long header", mp4(1, 90000), 0, "longer than any recording"},
		{"zero rate", mp4(0, 10), 0, "sample rate of 0"},
		{"text", []byte("SAY: not audio"), 0, "not an audio format"},
		{"empty", nil, 0, "not an audio format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Duration(tc.data)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func math64(v int64) uint64 { return uint64(v) }

// Real recordings: espeak-ng speaks a sentence to a WAV file, opusenc
// makes a voice note (Ogg Opus) of it; both measure the same length.
func TestDurationOfRealRecordings(t *testing.T) {
	for _, tool := range []string{"espeak-ng", "opusenc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s is not installed (make deps installs it): %v", tool, err)
		}
	}
	dir := t.TempDir()
	wav, ogg := filepath.Join(dir, "s.wav"), filepath.Join(dir, "s.ogg")
	out, err := exec.Command("espeak-ng", "-w", wav, "The quick brown fox jumps over the lazy dog.").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("opusenc", "--quiet", wav, ogg).CombinedOutput()
	require.NoError(t, err, "%s", out)
	w, err := os.ReadFile(wav)
	require.NoError(t, err)
	o, err := os.ReadFile(ogg)
	require.NoError(t, err)
	dw, err := Duration(w)
	require.NoError(t, err)
	do, err := Duration(o)
	require.NoError(t, err)
	assert.Greater(t, dw, time.Second, "a sentence lasts seconds")
	assert.Less(t, dw, 10*time.Second)
	assert.InDelta(t, dw.Seconds(), do.Seconds(), 0.05, "the voice note lasts as long as the recording")
}

func FuzzDuration(f *testing.F) {
	f.Add(WAV(0.1, "SAY: x"))
	f.Add(append(oggPage(7, 0, opusHead(312)), oggPage(7, 48000, []byte("a"))...))
	f.Add(mp3Frames(3))
	f.Add(mp4(600, 60))
	f.Add(flac(8000, 800))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Duration(data)
		if err == nil && (d <= 0 || d > maxLength) {
			t.Fatalf("length %s accepted", d)
		}
	})
}
