// Package audio reads how long a recording lasts from its own bytes, for
// the formats Telegram's voice notes, audio files and video notes come in:
// Ogg (Opus, Vorbis), WAV, MP3, FLAC and MP4/M4A. The host measures a file
// before it pays to have it transcribed (a group's daily limit counts these
// seconds), so the sender's own claim of a length is never used. The bytes
// are untrusted: every read is bounds-checked, and a file that cannot be
// read is an error, never a guess.
//
// Written here rather than taken from a library: no kept Go module reads
// the length of all five, and each takes a few dozen lines of header
// arithmetic (FuzzDuration holds them to it).
package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrUnknown is a file in none of the formats read here.
var ErrUnknown = errors.New("not an audio format the host can measure (Ogg, WAV, MP3, FLAC, MP4)")

// maxLength bounds what a header may claim: nothing a user sends lasts a
// day, and a larger value is a forged header.
const maxLength = 24 * time.Hour

// Duration is how long the recording in data lasts.
func Duration(data []byte) (time.Duration, error) {
	var d time.Duration
	var err error
	switch {
	case bytes.HasPrefix(data, []byte("OggS")):
		d, err = oggLength(data)
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WAVE":
		d, err = wavLength(data)
	case bytes.HasPrefix(data, []byte("fLaC")):
		d, err = flacLength(data)
	case len(data) >= 8 && string(data[4:8]) == "ftyp":
		d, err = mp4Length(data)
	case bytes.HasPrefix(data, []byte("ID3")) || len(data) >= 2 && data[0] == 0xFF && data[1]&0xE0 == 0xE0:
		d, err = mp3Length(data)
	default:
		return 0, ErrUnknown
	}
	switch {
	case err != nil:
		return 0, err
	case d <= 0:
		return 0, errors.New("the recording is empty")
	case d > maxLength:
		return 0, fmt.Errorf("the header claims %s, longer than any recording a chat sends", d)
	}
	return d, nil
}

// seconds is n units of 1/rate second, bounded so no product overflows.
func seconds(n, rate uint64) (time.Duration, error) {
	if rate == 0 {
		return 0, errors.New("sample rate of 0")
	}
	s := float64(n) / float64(rate)
	if s > maxLength.Seconds() || math.IsNaN(s) {
		return 0, fmt.Errorf("the header claims %.0f s, longer than any recording a chat sends", s)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// oggLength walks every Ogg page. The first page of the first logical
// stream names its codec; the largest granule position of that stream is
// where its last sample ends. A damaged page is skipped by searching for
// the next capture pattern, as decoders do, so bytes a decoder would still
// play are counted.
func oggLength(data []byte) (time.Duration, error) {
	var serial uint32
	var codec string
	var rate, preSkip uint64
	var last uint64
	seen := false
	for off := 0; off+27 <= len(data); {
		if string(data[off:off+4]) != "OggS" || data[off+4] != 0 {
			next := bytes.Index(data[off+1:], []byte("OggS"))
			if next < 0 {
				break
			}
			off += 1 + next
			continue
		}
		granule := binary.LittleEndian.Uint64(data[off+6:])
		s := binary.LittleEndian.Uint32(data[off+14:])
		nsegs := int(data[off+26])
		head := off + 27 + nsegs
		if head > len(data) {
			break
		}
		body := 0
		for _, l := range data[off+27 : head] {
			body += int(l)
		}
		if head+body > len(data) {
			body = len(data) - head // a cut last page: its granule still counts
		}
		page := data[head : head+body]
		if !seen {
			seen, serial = true, s
			switch {
			case bytes.HasPrefix(page, []byte("OpusHead")) && len(page) >= 12:
				codec, rate, preSkip = "opus", 48000, uint64(binary.LittleEndian.Uint16(page[10:]))
			case bytes.HasPrefix(page, []byte("\x01vorbis")) && len(page) >= 16:
				codec, rate = "vorbis", uint64(binary.LittleEndian.Uint32(page[12:]))
			default:
				return 0, errors.New("an Ogg stream of a codec other than Opus or Vorbis")
			}
		}
		// -1 marks a page on which no packet ends.
		if s == serial && granule != math.MaxUint64 && granule > last {
			last = granule
		}
		off = head + body
	}
	if codec == "" {
		return 0, errors.New("an Ogg file without a stream header")
	}
	if last <= preSkip {
		return 0, errors.New("the recording is empty")
	}
	return seconds(last-preSkip, rate)
}

// wavLength is the data chunk's bytes over the format's bytes per second.
// A data size larger than the file (a recording written as a stream) is
// cut to what the file holds.
func wavLength(data []byte) (time.Duration, error) {
	var byteRate uint64
	for off := 12; off+8 <= len(data); {
		id := string(data[off : off+4])
		size := uint64(binary.LittleEndian.Uint32(data[off+4:]))
		body := off + 8
		switch id {
		case "fmt ":
			if size < 16 || uint64(body)+16 > uint64(len(data)) {
				return 0, errors.New("a WAV file with a short format chunk")
			}
			byteRate = uint64(binary.LittleEndian.Uint32(data[body+8:]))
		case "data":
			if byteRate == 0 {
				return 0, errors.New("a WAV file whose data comes before its format, or of 0 bytes a second")
			}
			return seconds(min(size, uint64(len(data)-body)), byteRate)
		}
		next := uint64(body) + size + size&1 // chunks are padded to even sizes
		if next > uint64(len(data)) {
			break
		}
		off = int(next)
	}
	return 0, errors.New("a WAV file without a data chunk")
}

// flacLength reads the STREAMINFO block: total samples over sample rate.
func flacLength(data []byte) (time.Duration, error) {
	// "fLaC", then the block header (type 0, 3 bytes of length), then
	// STREAMINFO: 10 bytes of block sizes, 20 bits rate, 3 channels, 5
	// bits per sample, 36 bits total samples.
	if len(data) < 8+18 || data[4]&0x7F != 0 {
		return 0, errors.New("a FLAC file without its STREAMINFO block")
	}
	si := data[8:]
	rate := uint64(si[10])<<12 | uint64(si[11])<<4 | uint64(si[12])>>4
	total := uint64(si[13]&0x0F)<<32 | uint64(binary.BigEndian.Uint32(si[14:]))
	if total == 0 {
		return 0, errors.New("a FLAC file that does not say how long it is")
	}
	return seconds(total, rate)
}

// mp4Length reads the movie header (moov/mvhd): duration over time scale.
func mp4Length(data []byte) (time.Duration, error) {
	moov, ok := mp4Box(data, "moov")
	if !ok {
		return 0, errors.New("an MP4 file without a movie box (moov)")
	}
	mvhd, ok := mp4Box(moov, "mvhd")
	if !ok || len(mvhd) < 4 {
		return 0, errors.New("an MP4 file without a movie header (mvhd)")
	}
	var scale, dur uint64
	switch mvhd[0] {
	case 0:
		if len(mvhd) < 20 {
			return 0, errors.New("a short MP4 movie header")
		}
		scale, dur = uint64(binary.BigEndian.Uint32(mvhd[12:])), uint64(binary.BigEndian.Uint32(mvhd[16:]))
	case 1:
		if len(mvhd) < 32 {
			return 0, errors.New("a short MP4 movie header")
		}
		scale, dur = uint64(binary.BigEndian.Uint32(mvhd[20:])), binary.BigEndian.Uint64(mvhd[24:])
	default:
		return 0, fmt.Errorf("an MP4 movie header of version %d", mvhd[0])
	}
	return seconds(dur, scale)
}

// mp4Box is the body of the first box called name among the boxes in data.
func mp4Box(data []byte, name string) ([]byte, bool) {
	for off := uint64(0); off+8 <= uint64(len(data)); {
		size := uint64(binary.BigEndian.Uint32(data[off:]))
		head := uint64(8)
		switch size {
		case 0: // to the end
			size = uint64(len(data)) - off
		case 1: // a 64-bit size follows
			if off+16 > uint64(len(data)) {
				return nil, false
			}
			size, head = binary.BigEndian.Uint64(data[off+8:]), 16
		}
		if size < head || size > uint64(len(data))-off {
			return nil, false
		}
		if string(data[off+4:off+8]) == name {
			return data[off+head : off+size], true
		}
		off += size
	}
	return nil, false
}

// mp3Length adds up the MPEG audio frames, after an ID3v2 tag. Where the
// frames break off it searches on for the next two good frames in a row,
// as a decoder resynchronises, so a damaged frame cannot hide the audio
// after it.
func mp3Length(data []byte) (time.Duration, error) {
	off := 0
	if len(data) >= 10 && string(data[:3]) == "ID3" {
		size := int(data[6]&0x7F)<<21 | int(data[7]&0x7F)<<14 | int(data[8]&0x7F)<<7 | int(data[9]&0x7F)
		off = 10 + size
		if data[5]&0x10 != 0 {
			off += 10 // a footer
		}
	}
	var total time.Duration
	frames := 0
	synced := false // the last frame was good, so the next header is trusted alone
	for off+4 <= len(data) {
		n, d, ok := mp3Frame(data[off:])
		ok = ok && off+n <= len(data)
		// Out of sync, a lone good-looking header in noise is not a frame:
		// the next one must follow it.
		if ok && !synced && off+n < len(data) {
			_, _, ok = mp3Frame(data[off+n:])
		}
		if !ok {
			synced = false
			off++
			continue
		}
		synced = true
		total += d
		frames++
		off += n
		if total > maxLength {
			break
		}
	}
	if frames == 0 {
		return 0, errors.New("an MP3 file without audio frames")
	}
	return total, nil
}

var (
	// mp3Bitrates[version is MPEG-1][layer-1][index], in kbit/s.
	mp3Bitrates = [2][3][16]int{
		{ // MPEG-2 and 2.5
			{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160},
		},
		{ // MPEG-1
			{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448},
			{0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384},
			{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320},
		},
	}
	mp3Rates = [4][3]int{{11025, 12000, 8000}, {}, {22050, 24000, 16000}, {44100, 48000, 32000}} // by version bits
)

// mp3Frame reads the frame header at the start of b: the frame's length
// in bytes and in time.
func mp3Frame(b []byte) (int, time.Duration, bool) {
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return 0, 0, false
	}
	version := int(b[1]>>3) & 3 // 0: 2.5, 2: 2, 3: 1
	layer := 4 - int(b[1]>>1)&3 // 1, 2, 3 (4: reserved)
	bi, ri, pad := int(b[2]>>4), int(b[2]>>2)&3, int(b[2]>>1)&1
	if version == 1 || layer == 4 || bi == 0 || bi == 15 || ri == 3 {
		return 0, 0, false
	}
	v1 := 0
	if version == 3 {
		v1 = 1
	}
	rate := mp3Rates[version][ri]
	bitrate := mp3Bitrates[v1][layer-1][bi] * 1000
	var n, samples int
	switch {
	case layer == 1:
		n, samples = (12*bitrate/rate+pad)*4, 384
	case layer == 2 || v1 == 1:
		n, samples = 144*bitrate/rate+pad, 1152
	default: // layer III of MPEG-2 and 2.5
		n, samples = 72*bitrate/rate+pad, 576
	}
	if n < 4 {
		return 0, 0, false
	}
	return n, time.Duration(samples) * time.Second / time.Duration(rate), true
}
