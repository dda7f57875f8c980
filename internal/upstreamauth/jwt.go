package upstreamauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/toolgate/toolgate/internal/keystore"
)

// clientAssertionLifetime is how long a private_key_jwt assertion is valid.
const clientAssertionLifetime = 2 * time.Minute

// signerOf parses a PEM private key and settles the JWS algorithm: alg when
// given (and matching the key), else ES256/ES384/ES512 by the EC curve, RS256
// for RSA.
func signerOf(pemKey keystore.Secret, alg string) (crypto.Signer, string, error) {
	var key crypto.Signer
	err := pemKey.Use(func(b []byte) error {
		block, _ := pem.Decode(b)
		if block == nil {
			return errors.New("the client credentials private key is not PEM")
		}
		defer clear(block.Bytes)
		if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
			s, ok := k.(crypto.Signer)
			if !ok {
				return errors.New("the client credentials private key cannot sign")
			}
			key = s
			return nil
		}
		if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
			key = k
			return nil
		}
		if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
			key = k
			return nil
		}
		return errors.New("the client credentials private key is not a PKCS#8, SEC 1 or PKCS#1 key")
	})
	if err != nil {
		return nil, "", err
	}
	natural := ""
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			natural = "ES256"
		case elliptic.P384():
			natural = "ES384"
		case elliptic.P521():
			natural = "ES512"
		}
		if alg != "" && alg != natural {
			return nil, "", fmt.Errorf("the client credentials key is for %s, not %s", natural, alg)
		}
	case *rsa.PrivateKey:
		natural = "RS256"
		switch alg {
		case "", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		default:
			return nil, "", fmt.Errorf("an RSA key does not sign %s", alg)
		}
	}
	if natural == "" {
		return nil, "", errors.New("the client credentials key is neither a P-256/P-384/P-521 EC key nor an RSA key")
	}
	if alg == "" {
		alg = natural
	}
	return key, alg, nil
}

// clientAssertion is the private_key_jwt assertion (RFC 7523 §2.2, RFC 7521):
// iss and sub the client id, aud the authorization server's issuer
// identifier, a short lifetime and a fresh jti.
func clientAssertion(c *Client, issuer string) (keystore.Secret, error) {
	key, alg, err := signerOf(c.privateKey, c.signingAlg)
	if err != nil {
		return keystore.Secret{}, err
	}
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": c.ID, "sub": c.ID, "aud": issuer,
		"iat": now.Unix(), "exp": now.Add(clientAssertionLifetime).Unix(),
		"jti": rand.Text(),
	})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	sig, err := jwsSign(key, alg, []byte(signing))
	if err != nil {
		return keystore.Secret{}, err
	}
	return keystore.NewSecretString(signing + "." + enc.EncodeToString(sig)), nil
}

func jwsSign(key crypto.Signer, alg string, data []byte) ([]byte, error) {
	var h hash.Hash
	var ch crypto.Hash
	switch alg[2:] {
	case "256":
		h, ch = sha256.New(), crypto.SHA256
	case "384":
		h, ch = sha512.New384(), crypto.SHA384
	case "512":
		h, ch = sha512.New(), crypto.SHA512
	default:
		return nil, fmt.Errorf("JWS algorithm %s is not supported", alg)
	}
	h.Write(data)
	digest := h.Sum(nil)
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, digest)
		if err != nil {
			return nil, err
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		out := make([]byte, 2*size)
		r.FillBytes(out[:size])
		s.FillBytes(out[size:])
		return out, nil
	case *rsa.PrivateKey:
		if alg[0] == 'P' {
			return rsa.SignPSS(rand.Reader, k, ch, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
		return rsa.SignPKCS1v15(rand.Reader, k, ch, digest)
	}
	return nil, errors.New("unsupported key")
}
